package instance

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/markov-agents/markov/internal/errtext"
)

// This file is the resume conditions of a suspension besides an explicit
// resume: a named event (WithEvent) and a deadline with its on-timeout
// action (WithTimeout, WithDeadline with OnTimeoutFail, OnTimeoutResume or
// OnTimeoutSummary). Conditions returns them as one value, the shape the
// ACP draft RFC's resumeWhen echoes.

// MaxEventLen is the length, in bytes, of the longest event name.
const MaxEventLen = 256

// CheckEvent returns nil when name can name an event: not empty, at most
// MaxEventLen bytes, valid UTF-8, no control characters. Otherwise the
// error wraps ErrInvalidEvent.
func CheckEvent(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidEvent)
	case len(name) > MaxEventLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidEvent, MaxEventLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidEvent)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: contains a control character", ErrInvalidEvent)
	}
	return nil
}

// WithEvent makes the suspension wait for the named event too (for example
// "ci.passed" or "file.changed:src/lib.rs"): a durable runner's Signal of
// that name resumes it, with the signal's payload, cause CauseEvent. An
// explicit resume still works, and a deadline still applies. A name
// CheckEvent refuses fails the option (ErrInvalidEvent).
func WithEvent(name string) SuspendOption {
	return func(r *SuspendRequest) error {
		if err := CheckEvent(name); err != nil {
			return err
		}
		r.Event = name
		return nil
	}
}

// OnTimeoutFail makes an expired suspension fail with an error result
// naming the deadline — the default, stated explicitly (it undoes an
// earlier OnTimeoutResume or OnTimeoutSummary).
func OnTimeoutFail() SuspendOption {
	return func(r *SuspendRequest) error {
		r.OnTimeout = TimeoutAction{}
		return nil
	}
}

// OnTimeoutSummary makes an expired suspension resolve with a summary
// instead of failing: the model (or, for a whole-instance suspension, the
// instance) is told that the wait timed out and what was pending
// (TimeoutSummary), and goes on.
func OnTimeoutSummary() SuspendOption {
	return func(r *SuspendRequest) error {
		r.OnTimeout = TimeoutAction{Summarize: true}
		return nil
	}
}

// TimeoutKind names an on-timeout action, with the ACP draft RFC's names.
type TimeoutKind string

// The on-timeout actions.
const (
	// TimeoutFail: the call fails with an error result naming the deadline.
	TimeoutFail TimeoutKind = "fail"
	// TimeoutResumeWithInput: the call resolves with the given payload.
	TimeoutResumeWithInput TimeoutKind = "resume_with_input"
	// TimeoutResumeWithSummary: the call resolves with a summary of what
	// was pending (TimeoutSummary).
	TimeoutResumeWithSummary TimeoutKind = "resume_with_summary"
)

// ParseTimeoutKind returns the action named s (one of the TimeoutKind
// values; empty means TimeoutFail), or an error wrapping ErrInvalidInput.
func ParseTimeoutKind(s string) (TimeoutKind, error) {
	return errtext.OneOf(ErrInvalidInput, "on-timeout action", s, TimeoutFail, TimeoutFail, TimeoutResumeWithInput, TimeoutResumeWithSummary)
}

// Kind returns the action's name.
func (a TimeoutAction) Kind() TimeoutKind {
	switch {
	case a.Resume:
		return TimeoutResumeWithInput
	case a.Summarize:
		return TimeoutResumeWithSummary
	}
	return TimeoutFail
}

// Conditions are what a suspension waits for besides an explicit resume,
// in the shape of the ACP draft RFC's resumeWhen.
type Conditions struct {
	// Event is the named event that resumes it (empty: none).
	Event string
	// Deadline is when it times out (zero: never); Timeout is the wait
	// from the suspension to the deadline.
	Deadline time.Time
	Timeout  time.Duration
	// OnTimeout is what happens at the deadline.
	OnTimeout TimeoutKind
}

// IsZero reports whether c holds no condition: only an explicit resume
// ends the wait.
func (c Conditions) IsZero() bool { return c.Event == "" && c.Deadline.IsZero() }

// Conditions returns the call's resume conditions.
func (c *SuspendedCall) Conditions() Conditions {
	out := Conditions{Event: c.Event}
	if !c.Deadline.IsZero() {
		out.Deadline, out.OnTimeout = c.Deadline, c.OnTimeout.Kind()
		if !c.SuspendedAt.IsZero() {
			out.Timeout = c.Deadline.Sub(c.SuspendedAt)
		}
	}
	return out
}

// TimeoutSummary is the text an expired call with OnTimeoutSummary
// resolves with: that the wait timed out, when, and what was pending — the
// call's kind, name, reason, input, the event it waited for.
func TimeoutSummary(c *SuspendedCall) string {
	var b strings.Builder
	b.WriteString("The wait timed out with no result")
	if !c.Deadline.IsZero() {
		fmt.Fprintf(&b, " at %s", c.Deadline.UTC().Format(time.RFC3339))
		if !c.SuspendedAt.IsZero() {
			fmt.Fprintf(&b, ", %s after it began", c.Deadline.Sub(c.SuspendedAt).Round(time.Second))
		}
	}
	b.WriteString(". Pending was ")
	switch c.Kind {
	case KindTool:
		fmt.Fprintf(&b, "the tool call %s", c.Name)
	case KindCommand:
		fmt.Fprintf(&b, "the command %s", c.Name)
	default:
		b.WriteString("a pause of this task")
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, ", waiting for: %s", c.Reason)
	}
	if c.Event != "" {
		fmt.Fprintf(&b, " (or the event %q)", c.Event)
	}
	if len(c.Input) > 0 && string(c.Input) != "{}" && string(c.Input) != "null" {
		fmt.Fprintf(&b, ", with input %s", errtext.Clip(string(c.Input), 512))
	}
	b.WriteString(". Go on without that result.")
	return b.String()
}

// Options returns the suspend options that set c: WithEvent for Event;
// WithTimeout for Timeout (or WithDeadline for Deadline when Timeout is
// zero) with the OnTimeout action, input being the payload of
// TimeoutResumeWithInput. An invalid event fails with ErrInvalidEvent; an
// unknown action, a negative timeout, an action without a timeout or input
// with another action, with ErrInvalidInput.
func (c Conditions) Options(input any) ([]SuspendOption, error) {
	var opts []SuspendOption
	if c.Event != "" {
		if err := CheckEvent(c.Event); err != nil {
			return nil, err
		}
		opts = append(opts, WithEvent(c.Event))
	}
	kind, err := ParseTimeoutKind(string(c.OnTimeout))
	switch {
	case err != nil:
		return nil, err
	case c.Timeout < 0:
		return nil, fmt.Errorf("%w: negative timeout %s", ErrInvalidInput, c.Timeout)
	case c.Timeout > 0:
		opts = append(opts, WithTimeout(c.Timeout))
	case !c.Deadline.IsZero():
		opts = append(opts, WithDeadline(c.Deadline))
	case c.OnTimeout != "":
		return nil, fmt.Errorf("%w: on-timeout action %s without a timeout", ErrInvalidInput, c.OnTimeout)
	}
	if input != nil && kind != TimeoutResumeWithInput {
		return nil, fmt.Errorf("%w: an on-timeout input goes with %s only", ErrInvalidInput, TimeoutResumeWithInput)
	}
	switch kind {
	case TimeoutResumeWithInput:
		opts = append(opts, OnTimeoutResume(input, false))
	case TimeoutResumeWithSummary:
		opts = append(opts, OnTimeoutSummary())
	}
	return opts, nil
}
