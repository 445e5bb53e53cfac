package durable

import (
	"context"
	"iter"

	"github.com/markov-agents/markov/machine"
)

// RunEvents is [Runner.Run] yielding the run's events as they happen, as
// machine.Machine.Events does: text and thinking deltas as the model
// streams them, tool calls as they start and finish, suspensions and the
// other lifecycle events, and an EventStep per step. Every step is saved
// before its EventStep is yielded — a checkpoint step too (machine.Replied:
// the model's replies saved, their tools not run yet), unlike Run, so that
// a caller can stop there, before any tool dispatches. The deltas and tool
// events of a round come before its save: a crash can lose what they
// showed, never a saved step. The inputs' command steps come first, as
// EventSteps. The contract is Run's otherwise: the hold is taken for the
// whole sequence, an error is yielded once and ends it, breaking out
// leaves the store at the last yielded step, and the sequence is
// single-use.
func (r *Runner) RunEvents(ctx context.Context, id string, inputs ...machine.Input) iter.Seq2[machine.Event, error] {
	return holding(ctx, r, id, func(h *Hold) iter.Seq2[machine.Event, error] {
		return loaded(ctx, h, func(s *session, yield func(machine.Event, error) bool) {
			recorded(ctx, s, inputs, yield, func(steps []machine.Step) { s.events(ctx, steps, yield) })
		})
	})
}

// events yields the command steps an apply returned as EventSteps, then
// runs the machine on, yielding its events (every step once saved).
func (s *session) events(ctx context.Context, steps []machine.Step, yield func(machine.Event, error) bool) {
	stepEvent := func(st *machine.Step) machine.Event { return machine.Event{Kind: machine.EventStep, Step: st} }
	drive(ctx, s, steps, yield, stepEvent, func(e machine.Event) bool {
		if e.Kind == machine.EventStep {
			return s.yieldStep(ctx, e.Step, yield)
		}
		return yield(e, nil)
	})
}

// yieldStep saves step st and yields it, after the suspension events of
// the caller suspensions it reports (applied at its boundary or the
// checkpoint before); false when the sequence ends.
func (s *session) yieldStep(ctx context.Context, st *machine.Step, yield func(machine.Event, error) bool) bool {
	before := len(st.Events)
	if _, err := s.saveStep(ctx, st); err != nil {
		yield(machine.Event{}, err)
		return false
	}
	for _, ev := range st.Events[before:] {
		e := machine.Event{Kind: machine.EventSuspended, InstanceID: ev.InstanceID, Lifecycle: &ev}
		for _, c := range st.Suspensions {
			if c.SuspendID == ev.SuspendID {
				e.Call = &c
			}
		}
		if !yield(e, nil) {
			return false
		}
	}
	return yield(machine.Event{Kind: machine.EventStep, Step: st}, nil)
}

// Charter is the charter the runner's machines run against.
func (r *Runner) Charter() *machine.Charter { return r.charter }
