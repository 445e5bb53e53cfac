package machine

import (
	"sync"
	"time"
)

// The leaves of a round run on goroutines that outlive the round: a
// goroutine that finished its leaf waits a while for the next one instead
// of exiting, so a busy machine (many workers, round after round) does not
// start a goroutine per leaf and grow its stack again inside the model
// and tool code each time; an idle goroutine waits above a floor of stack
// (stackFloor), so that the collector does not take back the stack its
// tasks need. Every leaf still starts at once: a leaf that
// finds no goroutine waiting gets a new one. A round's steps are joined
// before its step is yielded, as ever; only the idle goroutines remain,
// and they exit after idleFor/2 to idleFor without work.
//
// The idle goroutines wait on channels of their own, and one timer for
// all of them (ticking every idleFor/2 while any is idle) dismisses those
// idle since the tick before last: a round of a hundred leaves wakes the
// hundred goroutines it needs, and arms, stops and checks no timer of
// theirs.

// idleFor is how long a goroutine waits for another leaf before it exits
// (at most; at least half of it).
const idleFor = 2 * time.Second

// task is one call fn(i) of a runAll, done when it returns.
type task struct {
	fn   func(int)
	i    int
	done *sync.WaitGroup
}

// runner is a goroutine that runs tasks. Its work channel holds the one
// task it is handed at a time; closing it dismisses the runner.
type runner struct {
	work chan task
	// tick is the reaper's tick count when the runner last went idle.
	tick uint64
}

// runnerPool is the idle runners and the timer that dismisses them.
type runnerPool struct {
	mu sync.Mutex
	// idle are the runners waiting for a task, the most recently idle
	// last (so ticks are non-decreasing along it).
	idle []*runner
	// ticks counts the reaper's ticks; reaping is set while its timer
	// is armed.
	ticks   uint64
	reaping bool
	timer   *time.Timer
	// every is the time between ticks (idleFor/2 when zero).
	every time.Duration
}

// runners is the process's pool: every machine's rounds share it.
var runners runnerPool

// take removes up to n idle runners, the most recently idle (warmest)
// first.
func (p *runnerPool) take(n int) []*runner {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := min(n, len(p.idle))
	if k == 0 {
		return nil
	}
	taken := make([]*runner, k)
	copy(taken, p.idle[len(p.idle)-k:])
	clear(p.idle[len(p.idle)-k:])
	p.idle = p.idle[:len(p.idle)-k]
	return taken
}

// park puts r back among the idle runners, arming the reaper if it is
// not.
func (p *runnerPool) park(r *runner) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.tick = p.ticks
	p.idle = append(p.idle, r)
	if !p.reaping {
		p.reaping = true
		if p.timer == nil {
			p.timer = time.AfterFunc(p.interval(), p.reap)
		} else {
			p.timer.Reset(p.interval())
		}
	}
}

// reap is the reaper's tick: it dismisses the runners idle since before
// the previous tick (for idleFor/2 to idleFor), and ticks again while
// any runner is idle.
func (p *runnerPool) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ticks++
	gone := 0
	for gone < len(p.idle) && p.idle[gone].tick+2 <= p.ticks {
		close(p.idle[gone].work)
		gone++
	}
	n := copy(p.idle, p.idle[gone:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	if p.reaping = n > 0; p.reaping {
		p.timer.Reset(p.interval())
	}
}

// interval is the time between the reaper's ticks.
func (p *runnerPool) interval() time.Duration {
	if p.every == 0 {
		return idleFor / 2
	}
	return p.every
}

// stackFloor is the stack an idle runner keeps in use below its tasks
// (serveAbove). The garbage collector halves the stack of a goroutine
// that uses less than a quarter of it: a runner waiting at the top of
// its stack would lose, collection after collection, the stack its last
// task grew, and grow it again inside the next task's model and tool
// code, copying it at each doubling. Waiting above this floor, it keeps
// a stack of up to four times the floor: room for tasks of up to 48 KiB
// of stack, at 32 to 64 KiB per idle runner (a hundred idle runners hold
// 3 to 6 MiB until they exit). A round of a hundred workers took 27% less
// CPU and 23% less time with it (BenchmarkWorkers, 800 → 614 µs).
const stackFloor = 16 << 10

// serveAbove serves r's tasks (serve) above stackFloor bytes of stack.
//
//go:noinline
func (p *runnerPool) serveAbove(r *runner) {
	var floor [stackFloor]byte
	holdStack(&floor)
	p.serve(r)
}

// holdStack keeps floor on its goroutine's stack: a frame the compiler
// may not drop.
//
//go:noinline
func holdStack(floor *[stackFloor]byte) { floor[0] = 1 }

// serve runs the tasks handed to r until r is dismissed. A runner is
// idle again before its task is done: the next round finds it waiting.
func (p *runnerPool) serve(r *runner) {
	for t := range r.work {
		t.fn(t.i)
		p.park(r)
		t.done.Done()
	}
}

// runAll runs fn(0) … fn(n-1) concurrently, each on a runner of its own
// (an idle one, or a new one), and waits for them.
func (p *runnerPool) runAll(n int, fn func(i int)) {
	var wg sync.WaitGroup
	wg.Add(n)
	idle := p.take(n)
	for i := range n {
		t := task{fn: fn, i: i, done: &wg}
		if i < len(idle) {
			idle[i].work <- t
			continue
		}
		r := &runner{work: make(chan task, 1)}
		r.work <- t
		go p.serveAbove(r)
	}
	wg.Wait()
}
