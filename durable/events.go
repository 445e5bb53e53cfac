package durable

import (
	"context"
	"iter"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// RunEvents is [Runner.Run] yielding the run's events as they happen, as
// machine.Machine.Events does for the same inputs: text and thinking
// deltas as the model streams them, tool calls as they start and finish,
// what the inputs and rounds changed (state changes, transitions, spawns,
// cedes), the suspension lifecycle events, and an EventStep per step Run
// would yield. Every step is saved before its EventStep is yielded. The
// runner's checkpoints (a model reply saved before its tools run) are not
// events: no stream shows them (docs/events.md). The deltas and tool events
// of a round come before its save: a crash can lose what they showed,
// never a saved step. What the inputs did comes first, saved before any
// model call. The contract is Run's otherwise: the hold is taken for the
// whole sequence, an error is yielded once and ends it, breaking out
// leaves the store at the last yielded step, and the sequence is
// single-use. The event log ([Runner.Watch]) records the same events.
func (r *Runner) RunEvents(ctx context.Context, id string, inputs ...machine.Input) iter.Seq2[machine.Event, error] {
	return holding(ctx, r, id, func(h *Hold) iter.Seq2[machine.Event, error] {
		return loaded(ctx, h, func(s *session, yield func(machine.Event, error) bool) {
			recorded(ctx, s, s.applier(inputs), yield, func(applied []machine.Event) { s.events(ctx, applied, yield) })
		})
	})
}

// events yields the events an apply returned, then runs the machine on,
// yielding its events (every step once saved, checkpoints not at all).
func (s *session) events(ctx context.Context, applied []machine.Event, yield func(machine.Event, error) bool) {
	drive(ctx, s, applied, yield, func(e machine.Event) bool { return yield(e, nil) }, func(e machine.Event) bool {
		if e.Kind == machine.EventStep {
			return s.yieldStep(ctx, e.Step, yield)
		}
		return yield(e, nil)
	})
}

// yieldStep saves step st and yields it, after the suspension events of
// the caller suspensions it reports (applied at its boundary or the
// checkpoint before); a checkpoint is saved and not yielded. It returns
// false when the sequence ends.
func (s *session) yieldStep(ctx context.Context, st *machine.Step, yield func(machine.Event, error) bool) bool {
	before := len(st.Events)
	keep, err := s.saveStep(ctx, st)
	if err != nil {
		yield(machine.Event{}, err)
		return false
	}
	if !keep {
		return true
	}
	for _, ev := range st.Events[before:] {
		var call *instance.SuspendedCall
		for _, c := range st.Suspensions {
			if c.SuspendID == ev.SuspendID {
				call = &c
			}
		}
		if !yield(suspendedEvent(ev, call), nil) {
			return false
		}
	}
	return yield(machine.Event{Kind: machine.EventStep, Step: st}, nil)
}

// Charter is the charter the runner's machines run against.
func (r *Runner) Charter() *machine.Charter { return r.charter }
