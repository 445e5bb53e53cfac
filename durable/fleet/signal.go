package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
)

// Signal accepts a signal of event for every pending suspension waiting
// for it (instance.WithEvent), as Resume accepts a result: one inbox
// entry per suspension, committed with the job that applies it, so each
// suspension is accepted at most once fleet-wide — a suspension that
// already has an accepted result or signal is skipped. It returns how
// many it accepted; each is woken with payload when its machine's job
// applies it (a machine.SignalInput naming it), unless it was resolved
// otherwise first. An event name instance.CheckEvent refuses fails with
// instance.ErrInvalidEvent, a payload that does not encode with
// instance.ErrPayloadDecode, accepting nothing.
func (f *Fleet) Signal(ctx context.Context, event string, payload any) (accepted int, err error) {
	if err := instance.CheckEvent(event); err != nil {
		return 0, fmt.Errorf("fleet: signal: %w", err)
	}
	raw, err := instance.EncodePayload(payload)
	if err != nil {
		return 0, fmt.Errorf("fleet: signal %s: %w", event, err)
	}
	waiting, err := f.runner.Pending(ctx, store.Filter{Event: event})
	if err != nil {
		return 0, fmt.Errorf("fleet: signal %s: %w", event, err)
	}
	for _, s := range waiting {
		_, err := f.acceptResult(ctx, s.ID, inSignal, entry{SuspendID: s.ID, Event: event, Payload: raw})
		switch {
		case errors.Is(err, instance.ErrAlreadyResolved) || errors.Is(err, instance.ErrUnknownSuspendID):
			continue // resolved, resumed or signalled meanwhile
		case err != nil:
			return accepted, err
		}
		accepted++
	}
	return accepted, nil
}
