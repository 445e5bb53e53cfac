package acp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// This file maps the RFC's resume conditions onto the library's.

// conditionOptions are the suspend options of resume conditions rc
// (checked by Check), made by instance.Conditions.Options as the other
// front ends make theirs. An error (an event name the library refuses)
// wraps ErrInvalidParams.
func conditionOptions(rc *ResumeConditions) ([]instance.SuspendOption, error) {
	if rc == nil {
		return nil, nil
	}
	ev, err := rc.event()
	if err != nil {
		return nil, err
	}
	c := instance.Conditions{Event: ev}
	var input any
	if t := rc.Timeout; t != nil {
		c.Timeout = time.Duration(math.Round(t.DurationMinutes * float64(time.Minute)))
		c.OnTimeout = instance.TimeoutKind(t.OnTimeout)
		if len(t.Input) > 0 {
			input = t.Input
		}
	}
	opts, err := c.Options(input)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	return opts, nil
}

// rfcConditions are the RFC conditions of c, nil if none.
func rfcConditions(c instance.Conditions) *ResumeConditions {
	if c.IsZero() {
		return nil
	}
	rc := &ResumeConditions{OnEvent: c.Event}
	if !c.Deadline.IsZero() {
		rc.Timeout = &ResumeTimeoutSpec{DurationMinutes: c.Timeout.Minutes(), OnTimeout: string(c.OnTimeout)}
	}
	return rc
}

// conditionsOf are the RFC conditions of a call, nil if none.
func conditionsOf(call instance.SuspendedCall) *ResumeConditions {
	return rfcConditions(call.Conditions())
}

// callEvent is the event call waits for, or "".
func callEvent(call instance.SuspendedCall) string { return call.Event }

// isEventCause reports whether a signal of the awaited event resolved it.
func isEventCause(ev *instance.Event) bool { return ev.Cause == instance.CauseEvent }

// freshTurn reports whether the resume started a fresh turn.
func freshTurn(ev *instance.Event) bool { return ev.FreshTurn }

// resumeInput is in, resumed in a fresh turn unless continued.
func resumeInput(in machine.ResumeInput, continued bool) machine.Input {
	in.FreshTurn = !continued
	return in
}

// suspendMachine parks machine id's primary leaf for the client
// (durable.Runner.Suspend): at once when no run holds it, otherwise at
// the point mode names, waiting for that run to end.
func (c *conn) suspendMachine(ctx context.Context, id string, req SuspendRequest) (durable.Suspension, error) {
	opts, err := conditionOptions(req.ResumeWhen)
	if err != nil {
		return durable.Suspension{}, err
	}
	sus, err := c.a.cfg.Runner.Suspend(ctx, id, req.Reason, durable.WithMode(durable.SuspendMode(req.Mode)), durable.WithConditions(opts...))
	if errors.Is(err, durable.ErrInvalidSuspend) {
		return durable.Suspension{}, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	return sus, err
}
