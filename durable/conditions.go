package durable

// This file is the resume conditions of durable machines: Signal (a named
// event resumes every suspension waiting for it, from any process).

import (
	"context"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// Signal resumes every pending suspension waiting for event
// (instance.WithEvent) with payload, each exactly once across every
// process sharing the store, and returns how many it woke. It finds them
// in the store's suspension index, then runs each of their machines under
// its Hold with a machine.SignalInput, to the end of the run: the calls a
// run resolves are those still pending once it holds the machine, so of
// concurrent signals (in any process) each suspension is woken by one.
// The woken calls' lifecycle events have cause instance.CauseEvent and
// name the event (instance.Event.Signal).
//
// An event name instance.CheckEvent refuses fails with
// instance.ErrInvalidEvent, a payload that does not encode with
// instance.ErrPayloadDecode, having run nothing. A machine whose run fails
// does not stop the others: the errors are joined, and woken counts every
// suspension resolved (a run that failed after resolving its calls
// counts them: they were saved).
func (r *Runner) Signal(ctx context.Context, event string, payload any) (woken int, err error) {
	if err := checkSignal(event, payload); err != nil {
		return 0, err
	}
	ids, err := r.waiting(ctx, event)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, id := range ids {
		n, err := r.signalMachine(ctx, id, event, payload)
		woken += n
		if err != nil {
			if ctx.Err() != nil {
				return woken, errors.Join(append(errs, err)...)
			}
			errs = append(errs, fmt.Errorf("signal %s: machine %s: %w", event, id, err))
		}
	}
	return woken, errors.Join(errs...)
}

// checkSignal checks an event name and a payload before a signal.
func checkSignal(event string, payload any) error {
	if err := instance.CheckEvent(event); err != nil {
		return fmt.Errorf("signal: %w", err)
	}
	if _, err := instance.EncodePayload(payload); err != nil {
		return fmt.Errorf("signal %s: %w", event, err)
	}
	return nil
}

// waiting returns the IDs of the machines with a pending suspension
// waiting for event, in index order, each once.
func (r *Runner) waiting(ctx context.Context, event string) ([]string, error) {
	list, err := r.store.ListSuspensions(ctx, store.Filter{Status: store.StatusPending, Event: event})
	if err != nil {
		return nil, fmt.Errorf("signal %s: %w", event, err)
	}
	seen := map[string]bool{}
	var ids []string
	for _, s := range list {
		if !seen[s.MachineID] {
			seen[s.MachineID] = true
			ids = append(ids, s.MachineID)
		}
	}
	return ids, nil
}

// signalMachine runs machine id with the signal and counts the calls it
// woke.
func (r *Runner) signalMachine(ctx context.Context, id, event string, payload any) (int, error) {
	woken := 0
	for st, err := range r.Run(ctx, id, machine.SignalInput{Event: event, Payload: payload}) {
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return woken, nil // deleted meanwhile: nothing waits any more
			}
			return woken, err
		}
		woken += Woken(st.Events, event)
	}
	return woken, nil
}

// Woken counts the events of a signal of event among a step's lifecycle
// events: the suspensions it resumed.
func Woken(events []instance.Event, event string) int {
	n := 0
	for _, ev := range events {
		if ev.Type == instance.EventResumed && ev.Cause == instance.CauseEvent && ev.Signal == event {
			n++
		}
	}
	return n
}
