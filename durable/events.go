package durable

import (
	"context"
	"fmt"
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
	return singleUse(func(yield func(machine.Event, error) bool) {
		h, err := r.Hold(ctx, id)
		if err != nil {
			yield(machine.Event{}, fmt.Errorf("hold machine %s: %w", id, err))
			return
		}
		defer h.Release()
		s, err := r.loadHeld(ctx, id)
		if err != nil {
			yield(machine.Event{}, err)
			return
		}
		s.runEvents(ctx, inputs, yield)
	})
}

func (s *session) runEvents(ctx context.Context, inputs []machine.Input, yield func(machine.Event, error) bool) {
	s.rec = s.r.newRecorder(s.id)
	defer s.rec.close()
	steps, err := s.apply(ctx, inputs)
	if err != nil {
		yield(machine.Event{}, err)
		return
	}
	for i := range steps {
		if !yield(machine.Event{Kind: machine.EventStep, Step: &steps[i]}, nil) || steps[i].Done {
			return
		}
	}
	for e, err := range s.m.Events(ctx) {
		if err != nil {
			yield(machine.Event{}, err)
			return
		}
		s.rec.add(ctx, e, s.rev)
		if e.Kind == machine.EventStep && !s.yieldStep(ctx, e.Step, yield) {
			return
		}
		if e.Kind != machine.EventStep && !yield(e, nil) {
			return
		}
	}
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
