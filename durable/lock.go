package durable

import (
	"context"
	"iter"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// Locker is an optional capability of a store: an exclusive lock per
// machine, shared by every process that uses the store, and released when
// its holder releases it or dies. A Runner whose store implements it holds
// a machine's lock for the whole of every run of that machine, so at most
// one process runs a given machine at any moment; store/postgres
// implements it with a session advisory lock, store/sqlite with an open
// file description lock on a file beside the database (Linux). Without
// it, a Runner locks machines in its own process only.
type Locker interface {
	// LockMachine takes machineID's lock and returns the function that
	// releases it. With wait false it does not wait: a lock held elsewhere
	// returns ok false and a nil unlock. A cancelled ctx stops the wait
	// with ctx.Err().
	LockMachine(ctx context.Context, machineID string, wait bool) (unlock func(), ok bool, err error)
}

// processLocks holds the process-local locks of each store, so that every
// Runner on one store in this process shares them.
var processLocks sync.Map // store.Store → *localLocks

// localLocksOf returns the process-local locks of st (fresh ones if st's
// type cannot be a map key).
func localLocksOf(st store.Store) *localLocks {
	if !reflect.TypeOf(st).Comparable() {
		return &localLocks{}
	}
	l, _ := processLocks.LoadOrStore(st, &localLocks{})
	return l.(*localLocks)
}

// localLocks is a Locker inside one process: one single-slot semaphore per
// machine while anyone holds or waits for it.
type localLocks struct {
	mu    sync.Mutex
	slots map[string]*slot
}

type slot struct {
	ch   chan struct{}
	refs int
}

func (l *localLocks) LockMachine(ctx context.Context, id string, wait bool) (func(), bool, error) {
	l.mu.Lock()
	if l.slots == nil {
		l.slots = map[string]*slot{}
	}
	s := l.slots[id]
	if s == nil {
		s = &slot{ch: make(chan struct{}, 1)}
		l.slots[id] = s
	}
	s.refs++
	l.mu.Unlock()
	drop := func() {
		l.mu.Lock()
		if s.refs--; s.refs == 0 {
			delete(l.slots, id)
		}
		l.mu.Unlock()
	}
	unlock := func() { <-s.ch; drop() }
	select {
	case s.ch <- struct{}{}:
		return unlock, true, nil
	default:
	}
	if !wait {
		drop()
		return nil, false, nil
	}
	select {
	case s.ch <- struct{}{}:
		return unlock, true, nil
	case <-ctx.Done():
		drop()
		return nil, false, ctx.Err()
	}
}

// A Hold is the exclusive right to run one machine: fleet-wide when the
// store is a [Locker], within the process otherwise. Every run of a Runner
// happens under one, so handler code — resume handlers, tools, commands —
// runs only in the process that holds the machine, after it loaded the
// latest save: a racer that lost waits, then finds the suspension it
// wanted resolved and fails with instance.ErrAlreadyResolved without
// running anything. Release it when done; a Hold is not safe for
// concurrent use.
type Hold struct {
	r       *Runner
	id      string
	release func()
}

// Hold waits for machine id's lock and returns it.
func (r *Runner) Hold(ctx context.Context, id string) (*Hold, error) {
	h, _, err := r.hold(ctx, id, true)
	return h, err
}

// TryHold takes machine id's lock if no one holds it; ok is false if
// someone does.
func (r *Runner) TryHold(ctx context.Context, id string) (h *Hold, ok bool, err error) {
	return r.hold(ctx, id, false)
}

// hold takes the process-local lock first, so that racers in one process
// wait in memory rather than each on a database connection, then the
// store's.
func (r *Runner) hold(ctx context.Context, id string, wait bool) (*Hold, bool, error) {
	unlockLocal, ok, err := r.local.LockMachine(ctx, id, wait)
	if !ok {
		return nil, false, err
	}
	release := unlockLocal
	if l, isLocker := r.store.(Locker); isLocker {
		unlockStore, ok, err := l.LockMachine(ctx, id, wait)
		if !ok {
			unlockLocal()
			return nil, false, err
		}
		release = func() { unlockStore(); unlockLocal() }
	}
	return &Hold{r: r, id: id, release: sync.OnceFunc(release)}, true, nil
}

// MachineID is the machine held.
func (h *Hold) MachineID() string { return h.id }

// Release gives the machine up. Calling it again does nothing.
func (h *Hold) Release() { h.release() }

// Delete removes the machine held, as [Runner.Delete] does; the hold stays
// taken.
func (h *Hold) Delete(ctx context.Context) error {
	h.r.histories.drop(h.id)
	return h.r.store.Delete(ctx, h.id)
}

// Run is [Runner.Run] under the hold: it loads the machine, applies inputs
// and runs it, saving every step before yielding it. The hold stays taken
// when the sequence ends.
func (h *Hold) Run(ctx context.Context, inputs ...machine.Input) iter.Seq2[machine.Step, error] {
	return singleUse(loaded(ctx, h, func(s *session, yield func(machine.Step, error) bool) { s.run(ctx, inputs, yield) }))
}

// loaded returns the sequence body yields for the machine h holds, loaded
// as loadHeld does; a failed load is yielded.
func loaded[T any](ctx context.Context, h *Hold, body func(*session, func(T, error) bool)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		s, err := h.r.loadHeld(ctx, h.id)
		if err != nil {
			var zero T
			yield(zero, err)
			return
		}
		body(s, yield)
	}
}

// loadHeld loads machine id for a run under its hold: a suspend request
// kept while no run held the machine applies first.
func (r *Runner) loadHeld(ctx context.Context, id string) (*session, error) {
	s, err := r.load(ctx, id, true)
	if err != nil {
		return nil, err
	}
	if _, err := s.applyRequests(ctx, atLoad); err != nil {
		return nil, err
	}
	return s, nil
}

// Expire resolves every suspension of the machine whose deadline is at or
// before now by its on-timeout action, reminds those whose reminder is
// due (instance.Policy.Remind), saves, and runs the machine on as
// Run does. A coordinator passes its database's clock as now, so that no
// process's own clock decides a deadline.
func (h *Hold) Expire(ctx context.Context, now time.Time) iter.Seq2[machine.Step, error] {
	return singleUse(func(yield func(machine.Step, error) bool) {
		s, err := h.r.load(ctx, h.id, true)
		if err != nil {
			yield(machine.Step{}, err)
			return
		}
		expire := func(ctx context.Context) ([]machine.Event, error) {
			due := slices.ContainsFunc(s.m.Pending(), func(c instance.SuspendedCall) bool { return c.Expired(now) || c.ReminderDue(now) })
			events, err := s.m.ExpireEvents(now)
			if err != nil {
				return nil, err
			}
			return events, s.applied(ctx, events, due)
		}
		recorded(ctx, s, expire, yield, func(applied []machine.Event) { s.proceed(ctx, applied, yield) })
	})
}
