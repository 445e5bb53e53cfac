package machine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// barrier returns a task that waits until all n tasks have started (or
// fails t after a minute): runAll must run every task at once, however
// long each blocks.
func barrier(t *testing.T, n int) func(int) {
	var started atomic.Int32
	all := make(chan struct{})
	return func(int) {
		if started.Add(1) == int32(n) {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(time.Minute):
			t.Error("runAll did not run its tasks at once")
		}
	}
}

func TestRunAllRunsEveryTaskAtOnce(t *testing.T) {
	p := &runnerPool{every: time.Hour} // the test ticks the reaper
	ran := make([]int, 40)
	p.runAll(40, func(i int) { ran[i]++ })
	for i, n := range ran {
		require.Equal(t, 1, n, "task %d", i)
	}
	p.mu.Lock()
	require.Len(t, p.idle, 40, "the runners wait for more")
	p.mu.Unlock()

	// The idle runners take 40 of the next 60 tasks, new ones the rest,
	// and all 60 run at once.
	p.runAll(60, barrier(t, 60))
	p.mu.Lock()
	require.Len(t, p.idle, 60)
	p.mu.Unlock()
}

func TestIdleRunnersAreDismissed(t *testing.T) {
	p := &runnerPool{every: time.Hour}
	p.runAll(3, func(int) {})
	p.mu.Lock()
	early := append([]*runner(nil), p.idle...)
	p.mu.Unlock()
	p.reap() // idle for less than a tick: kept
	p.runAll(2, func(int) {})
	p.mu.Lock()
	require.Len(t, p.idle, 3)
	p.mu.Unlock()

	p.reap() // the runner idle since before the last tick goes
	p.mu.Lock()
	require.Len(t, p.idle, 2)
	p.mu.Unlock()
	dismissed := 0
	for _, r := range early {
		select {
		case _, open := <-r.work:
			require.False(t, open, "a dismissed runner's channel is closed")
			dismissed++
		default:
		}
	}
	require.Equal(t, 1, dismissed)

	p.reap()
	p.mu.Lock()
	require.Empty(t, p.idle)
	require.False(t, p.reaping, "the reaper stops when no runner idles")
	p.mu.Unlock()

	// A dismissed pool starts runners again.
	var wg sync.WaitGroup
	wg.Add(1)
	p.runAll(1, func(int) { wg.Done() })
	wg.Wait()
}

// deep uses about n KiB of stack.
//
//go:noinline
func deep(n int) byte {
	var frame [1 << 10]byte
	frame[n%len(frame)] = byte(n)
	if n <= 1 {
		return frame[0]
	}
	return deep(n-1) + frame[n%len(frame)]
}

// Idle runners keep the stack their tasks grew: collections do not halve
// it, so the next round's tasks do not grow it again. Fifty runners
// whose task took 20 KiB of stack hold their stacks through four
// collections (without the floor, each halves them: 32 KiB to 2 KiB).
func TestIdleRunnersKeepTheirStacks(t *testing.T) {
	p := &runnerPool{every: time.Hour}
	const runners = 50
	p.runAll(runners, func(int) { deep(20) })
	stacks := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.StackInuse
	}
	runtime.GC()
	before := stacks()
	for range 4 {
		runtime.GC()
	}
	after := stacks()
	require.GreaterOrEqual(t, after+runners*4<<10, before, "idle runners' stacks shrank from %d to %d bytes", before, after)
	p.mu.Lock()
	require.Len(t, p.idle, runners, "the runners were idle all along")
	p.mu.Unlock()
}
