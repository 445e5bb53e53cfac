package machine

import (
	"sync"
	"time"
)

// The leaves of a round run on goroutines that outlive the round: a
// goroutine that finished its leaf waits a while for the next one instead
// of exiting, so a busy machine (many workers, round after round) does not
// start a goroutine per leaf and grow its stack again inside the model
// and tool code each time. Every leaf still starts at once: a leaf that
// finds no goroutine waiting gets a new one. A round's steps are joined
// before its step is yielded, as ever; only the idle goroutines remain,
// and they exit after idleFor without work.

// idleFor is how long a goroutine waits for another leaf before it exits.
const idleFor = 2 * time.Second

// task is one call fn(i) of a runAll, done when it returns.
type task struct {
	fn   func(int)
	i    int
	done *sync.WaitGroup
}

func (t task) run() {
	defer t.done.Done()
	t.fn(t.i)
}

// tasks hands work to the waiting goroutines.
var tasks = make(chan task)

// goRun runs t on a waiting goroutine, or on a new one.
func goRun(t task) {
	select {
	case tasks <- t:
	default:
		go serve(t)
	}
}

// serve runs t, then the work handed to it, until none comes for
// idleFor (between idleFor/2 and idleFor: the timer is pushed back only
// once half its time has passed, not after every task, which would take
// the timers' lock a hundred times a round of a hundred leaves).
func serve(t task) {
	timer := time.NewTimer(idleFor)
	defer timer.Stop()
	deadline := time.Now().Add(idleFor)
	for {
		t.run()
		if now := time.Now(); deadline.Sub(now) < idleFor/2 {
			timer.Reset(idleFor)
			deadline = now.Add(idleFor)
		}
		select {
		case t = <-tasks:
		case <-timer.C:
			return
		}
	}
}

// runAll runs fn(0) … fn(n-1) concurrently and waits for them.
func runAll(n int, fn func(i int)) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		goRun(task{fn: fn, i: i, done: &wg})
	}
	wg.Wait()
}
