package durable

// This file is the entry points of inputs from outside: Resume, Cancel
// and Invoke check an input in and return the Run that applies it, so
// that a refused input is a plain error before any step.

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// Run is the run of one machine that applies an input checked in by
// [Runner.Resume], [Runner.Cancel] or [Runner.Invoke]. Nothing has
// happened yet: ranging over Steps or Events takes the machine's [Hold]
// (waiting for a run elsewhere to end), applies the input and runs the
// machine, as [Runner.Run] and [Runner.RunEvents] do, with their
// contract; the context given to Resume, Cancel or Invoke bounds it. A
// Run that is never ranged over changes nothing and holds nothing. A Run
// runs once: ranging over Steps or Events a second time, or over the
// other one, yields machine.ErrIterReused and applies nothing twice.
//
// The input was checked when the Run was made, without the hold: another
// process may resolve or cancel the suspension first, or its deadline
// pass, before the Run is ranged over. The run then yields, before any
// step, an error wrapping ErrRejected and the reason
// (instance.ErrAlreadyResolved, machine.ErrDeadlinePassed), having run
// nothing and changed nothing.
type Run struct {
	r     *Runner
	ctx   context.Context
	id    string
	input machine.Input
	used  atomic.Bool
}

// MachineID is the machine the run applies its input to.
func (run *Run) MachineID() string { return run.id }

// Steps applies the input and runs the machine, yielding each step once
// it is saved ([Runner.Run]).
func (run *Run) Steps() iter.Seq2[machine.Step, error] {
	return once(&run.used, func() iter.Seq2[machine.Step, error] { return run.r.Run(run.ctx, run.id, run.input) })
}

// Events applies the input and runs the machine, yielding its events as
// they happen, every step once saved ([Runner.RunEvents]).
func (run *Run) Events() iter.Seq2[machine.Event, error] {
	return once(&run.used, func() iter.Seq2[machine.Event, error] { return run.r.RunEvents(run.ctx, run.id, run.input) })
}

// once returns the sequence seq makes, unless used was set: then (and
// from then on) machine.ErrIterReused.
func once[T any](used *atomic.Bool, seq func() iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		if used.Swap(true) {
			var zero T
			yield(zero, machine.ErrIterReused)
			return
		}
		seq()(yield)
	}
}

// Resume checks the resume in — its suspension exists and is pending
// (the store's index tells), its deadline has not passed, and the payload
// fits the call's payload schema ([Runner.CheckPayload]: the machine's
// tree is read, not its history; an error payload is not checked) — and
// returns the Run that applies it to the machine holding the suspension.
// A refused resume is the error, and nothing changed: an unknown
// suspension wraps instance.ErrUnknownSuspendID, one no longer pending
// instance.ErrAlreadyResolved, one past its deadline
// machine.ErrDeadlinePassed (its on-timeout action applies), a
// payload the schema refuses is an *instance.PayloadError (wrapping
// instance.ErrPayloadDecode) whose Message is the text for a person, and
// a decision the call's policy or digest refuses wraps
// instance.ErrForbidden, ErrStaleDecision or ErrAlreadyDecided (appended
// to the store's audit log as a refusal). A
// race lost between the check and the run surfaces from the Run (see
// [Run]).
func (r *Runner) Resume(ctx context.Context, in machine.ResumeInput) (*Run, error) {
	sus, err := r.pendingEntry(ctx, in.SuspendID)
	if err != nil {
		return nil, err
	}
	if err := r.checkResume(ctx, sus, in); err != nil {
		return nil, err
	}
	return r.newRun(ctx, sus.MachineID, in), nil
}

// checkResume checks resume in of pending suspension sus: its deadline
// (the index has it); then, reading the machine's tree, its payload
// against the call's schema unless it is an error payload, and the
// decision against the call's digest and policy (a refusal is audited).
func (r *Runner) checkResume(ctx context.Context, sus store.Suspension, in machine.ResumeInput) error {
	if !sus.Deadline.IsZero() && !r.charter.Now().Before(sus.Deadline) {
		return fmt.Errorf("suspension %s (deadline %s): %w", sus.ID, sus.Deadline.Format(time.RFC3339), machine.ErrDeadlinePassed)
	}
	m, err := r.loadTree(ctx, sus.MachineID)
	if err != nil {
		return err
	}
	for _, c := range m.Pending() {
		if c.SuspendID == in.SuspendID {
			if err := m.CheckPayload(in); err != nil {
				return err
			}
			return r.checkDecision(ctx, sus.MachineID, m, in)
		}
	}
	// The index said pending: a run resolved it since.
	return fmt.Errorf("suspension %s: %w", in.SuspendID, instance.ErrAlreadyResolved)
}

// Cancel checks the cancellation in — its suspension exists and is
// pending — and returns the Run that applies it: the call gets the error
// result "cancelled: reason". A refused cancellation is the error, and
// nothing changed (instance.ErrUnknownSuspendID,
// instance.ErrAlreadyResolved, and instance.ErrForbidden for a person a
// governed call's policy does not allow, appended to the store's audit
// log as a refusal). A cancellation is accepted past the deadline.
func (r *Runner) Cancel(ctx context.Context, in machine.CancelInput) (*Run, error) {
	sus, err := r.pendingEntry(ctx, in.SuspendID)
	if err != nil {
		return nil, err
	}
	if err := r.CheckCancel(ctx, sus.MachineID, in); err != nil {
		return nil, err
	}
	return r.newRun(ctx, sus.MachineID, in), nil
}

// CheckCancel reports whether the cancellation in of a call of machine
// machineID would be accepted, running nothing: a person who cancels a
// governed call (in.By set) must be one its policy allows to decide
// (instance.ErrForbidden, audited as a refusal). A cancellation naming
// nobody reads nothing.
func (r *Runner) CheckCancel(ctx context.Context, machineID string, in machine.CancelInput) error {
	if in.By == "" {
		return nil
	}
	m, err := r.loadTree(ctx, machineID)
	if err != nil {
		return err
	}
	return r.checkCancel(ctx, machineID, m, in)
}

// Invoke checks the command invocation inv — a command of the charter
// that its input fits (machine.Charter.CheckInvocation), for a machine
// that exists — and returns the Run that applies it to machine id. A
// refused invocation is the error, and nothing changed: an unknown
// command wraps command.ErrUnknownCommand, an input no declaration
// accepts instance.ErrInvalidInput, an unknown machine store.ErrNotFound.
// What depends on the machine — its target instance, the command's
// handler and the state it writes — is checked when the Run applies it:
// a failure then is an error wrapping ErrRejected, before any step.
func (r *Runner) Invoke(ctx context.Context, id string, inv command.Invocation) (*Run, error) {
	if err := r.charter.CheckInvocation(inv); err != nil {
		return nil, err
	}
	if _, err := r.loadTree(ctx, id); err != nil {
		return nil, err
	}
	return r.newRun(ctx, id, inv), nil
}

// newRun is the run of input in for machine id, bound by ctx.
func (r *Runner) newRun(ctx context.Context, id string, in machine.Input) *Run {
	return &Run{r: r, ctx: ctx, id: id, input: in}
}
