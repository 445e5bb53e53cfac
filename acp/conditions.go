package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// This file maps the RFC's resume conditions onto the library's.

// conditionOptions are the suspend options of resume conditions rc
// (checked by Check).
func conditionOptions(rc *ResumeConditions) ([]instance.SuspendOption, error) {
	var opts []instance.SuspendOption
	ev, err := rc.event()
	if err != nil {
		return nil, err
	}
	if ev != "" {
		return nil, fmt.Errorf("%w: resume on an event is not supported yet", ErrInvalidParams)
	}
	if t := rc.Timeout; t != nil {
		opts = append(opts, instance.WithTimeout(time.Duration(math.Round(t.DurationMinutes*float64(time.Minute)))))
		switch t.OnTimeout {
		case OnTimeoutResumeWithInput:
			var v any
			if len(t.Input) > 0 {
				v = json.RawMessage(t.Input)
			}
			opts = append(opts, instance.OnTimeoutResume(v, false))
		case OnTimeoutResumeWithSummary:
			return nil, fmt.Errorf("%w: resume_with_summary is not supported yet", ErrInvalidParams)
		}
	}
	return opts, nil
}

// conditionsOf are the RFC conditions of a call, nil if none.
func conditionsOf(call instance.SuspendedCall) *ResumeConditions {
	var rc ResumeConditions
	if ev := callEvent(call); ev != "" {
		rc.OnEvent = ev
	}
	if !call.Deadline.IsZero() {
		action := OnTimeoutFail
		if call.OnTimeout.Resume {
			action = OnTimeoutResumeWithInput
		}
		rc.Timeout = &ResumeTimeoutSpec{DurationMinutes: call.Deadline.Sub(call.SuspendedAt).Minutes(), OnTimeout: action}
	}
	if rc.OnEvent == "" && rc.Timeout == nil {
		return nil
	}
	return &rc
}

// callEvent is the event call waits for, or "".
func callEvent(instance.SuspendedCall) string { return "" }

// isEventCause reports whether a signal of the awaited event resolved it.
func isEventCause(*instance.Event) bool { return false }

// freshTurn reports whether the resume started a fresh turn.
func freshTurn(*instance.Event) bool { return false }

// resumeInput is in, resumed in a fresh turn unless continued.
func resumeInput(in machine.ResumeInput, continued bool) machine.Input {
	_ = continued
	return in
}

// suspendMachine parks the idle machine id.
func (c *conn) suspendMachine(context.Context, string, string, []instance.SuspendOption) (instance.SuspendedCall, error) {
	return instance.SuspendedCall{}, errors.New("acp: suspend is not supported yet")
}
