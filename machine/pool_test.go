package machine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

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

// Idle runners keep the stack their tasks grew: collections do not move
// it to a smaller one, so the next round's tasks do not grow it again.
// A stack that moves takes its frames elsewhere: fifty runners whose task
// took 20 KiB of stack find their tasks' first frames where they were
// after four collections (without the floor, each halved the stacks).
func TestIdleRunnersKeepTheirStacks(t *testing.T) {
	p := &runnerPool{every: time.Hour}
	const runners = 50
	frames := func() map[uintptr]bool {
		at := make([]uintptr, runners)
		p.runAll(runners, func(i int) {
			var here byte
			deep(20) // grows the stack in the first round, not in the second
			at[i] = uintptr(unsafe.Pointer(&here))
		})
		set := map[uintptr]bool{}
		for _, a := range at {
			set[a] = true
		}
		return set
	}
	before := frames()
	for range 4 {
		runtime.GC()
	}
	require.Equal(t, before, frames(), "idle runners' stacks moved")
	p.mu.Lock()
	require.Len(t, p.idle, runners, "the same runners ran both rounds")
	p.mu.Unlock()
}
