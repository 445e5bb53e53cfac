// Package bridge is the one suspension bridge of the protocol layer
// (DESIGN.md §8): it turns a durable machine's pending suspensions into
// protocol-neutral input requests, signs a continuation token that names
// the machine and its suspensions, and turns protocol-neutral answers into
// the machine's resume and cancel inputs, each checked against its
// suspension's payload schema before anything is consumed. A protocol
// package (mcp, a2a, an AG-UI endpoint) translates wire shapes to and from
// these types and owns nothing else.
package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// DefaultTokenTTL is how long a continuation token stays good when
// Config.TokenTTL is zero.
const DefaultTokenTTL = 24 * time.Hour

// Request is a pending suspension as a protocol shows it to the person or
// program that answers it.
type Request struct {
	SuspendID string
	MachineID string
	// Reason is the suspension's reason: the question or the message.
	Reason string
	// Kind and Name are the suspended call's kind ("tool", "command", …)
	// and its tool or command name.
	Kind, Name string
	// ToolUseID is the model's tool-use ID of a suspended tool call;
	// empty for other kinds.
	ToolUseID string
	// Schema is the JSON Schema an accepted answer must satisfy; empty
	// when any answer goes.
	Schema json.RawMessage
	// Metadata is the suspension's metadata, as its tool set it.
	Metadata json.RawMessage
	// Deadline is zero when the suspension never expires.
	Deadline time.Time
	// Event is the event the suspension waits for (instance.WithEvent):
	// a signal resolves it, not a person's answer. Empty for most.
	Event string
}

// Action is what an answer does with its suspension.
type Action string

// The actions of an Answer, as MCP's elicitation names them.
const (
	// Accept resumes the suspension with the answer's payload.
	Accept Action = "accept"
	// Decline resumes it with an error payload: the person said no.
	Decline Action = "decline"
	// Cancel cancels it: the call fails with "cancelled: reason".
	Cancel Action = "cancel"
)

// Answer is a protocol's reply to one Request.
type Answer struct {
	SuspendID string
	// Action is Accept when empty.
	Action Action
	// Payload is the accepted answer (JSON); it must satisfy the
	// suspension's schema.
	Payload json.RawMessage
	// Reason is the text of a decline or cancel.
	Reason string
}

// Config configures a Bridge.
type Config struct {
	// Runner is the durable runner whose machines the bridge serves.
	// Required.
	Runner *durable.Runner
	// Secret signs continuation tokens (HMAC-SHA256): at least 32 bytes.
	// Required.
	Secret []byte
	// TokenTTL is how long a token stays good (DefaultTokenTTL if zero).
	TokenTTL time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Bridge serves the suspensions of one durable runner's machines to a
// protocol. It is safe for concurrent use.
type Bridge struct {
	runner *durable.Runner
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

// MinSecret is the shortest secret New accepts, in bytes.
const MinSecret = 32

// New returns a bridge, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Bridge, error) {
	switch {
	case cfg.Runner == nil:
		return nil, fmt.Errorf("%w: no Runner", ErrInvalidConfig)
	case len(cfg.Secret) < MinSecret:
		return nil, fmt.Errorf("%w: Secret of %d bytes, want at least %d", ErrInvalidConfig, len(cfg.Secret), MinSecret)
	case cfg.TokenTTL < 0:
		return nil, fmt.Errorf("%w: TokenTTL %s is negative", ErrInvalidConfig, cfg.TokenTTL)
	}
	b := &Bridge{runner: cfg.Runner, secret: slices.Clone(cfg.Secret), ttl: cfg.TokenTTL, now: cfg.Now}
	if b.ttl == 0 {
		b.ttl = DefaultTokenTTL
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b, nil
}

// Requests returns the pending suspensions of machine machineID, in tree
// order, as input requests.
func (b *Bridge) Requests(ctx context.Context, machineID string) ([]Request, error) {
	m, _, err := b.runner.Load(ctx, machineID)
	if err != nil {
		return nil, err
	}
	return requests(machineID, m.Pending()), nil
}

// requests turns pending calls into requests.
func requests(machineID string, calls []instance.SuspendedCall) []Request {
	out := make([]Request, 0, len(calls))
	for _, c := range calls {
		out = append(out, Request{
			SuspendID: c.SuspendID, MachineID: machineID, Reason: c.Reason,
			Kind: string(c.Kind), Name: c.Name, ToolUseID: c.ToolUseID, Schema: c.PayloadSchema, Metadata: c.Metadata, Deadline: c.Deadline, Event: c.Event,
		})
	}
	return out
}

// Token returns a continuation token for the requests of machine
// machineID: it names the machine and the suspensions, and is good for
// the bridge's TokenTTL.
func (b *Bridge) Token(machineID string, reqs []Request) (string, error) {
	c := Continuation{MachineID: machineID, Expires: b.now().Add(b.ttl).Truncate(time.Second)}
	for _, r := range reqs {
		c.SuspendIDs = append(c.SuspendIDs, r.SuspendID)
	}
	return seal(b.secret, c)
}

// Open checks token — its signature, then its expiry — and returns the
// continuation it carries. A token that is malformed, tampered with or
// signed with another secret fails with ErrBadToken, one past its expiry
// with ErrTokenExpired; both are *TokenError.
func (b *Bridge) Open(token string) (Continuation, error) {
	c, err := open(b.secret, token)
	if err != nil {
		return Continuation{}, err
	}
	if err := b.expired(c.Expires); err != nil {
		return Continuation{}, err
	}
	return c, nil
}

// expired is the *TokenError of a token that expires at t, if it has.
func (b *Bridge) expired(t time.Time) error {
	if !b.now().Before(t) {
		return &TokenError{Err: ErrTokenExpired, Detail: "expired at " + t.UTC().Format(time.RFC3339)}
	}
	return nil
}

// Applied is what Inputs made of a set of answers.
type Applied struct {
	// Inputs are the resume and cancel inputs to run on the machine
	// (durable.Runner.Run or RunEvents), in the answers' order.
	Inputs []machine.Input
	// Resolved lists the answered suspensions that were no longer
	// pending (another answer was first): they are skipped, not errors,
	// and the caller shows the machine's current state.
	Resolved []string
}

// Inputs checks answers against the continuation c and the machine's
// pending suspensions, and returns the inputs that apply them, each
// attributed to by (instance.Event.By). Nothing is consumed here: every
// accepted payload is checked against its suspension's schema first, and
// any rejection fails the whole set with a *RejectedError (which wraps
// instance.ErrPayloadDecode). An answer for a suspension the token does
// not name fails with ErrNotInToken, an unknown action with
// ErrInvalidAnswer.
func (b *Bridge) Inputs(ctx context.Context, c Continuation, answers []Answer, by string) (Applied, error) {
	m, _, err := b.runner.Load(ctx, c.MachineID)
	if err != nil {
		return Applied{}, err
	}
	pending := map[string]bool{}
	for _, p := range m.Pending() {
		pending[p.SuspendID] = true
	}
	var out Applied
	var rejected RejectedError
	seen := map[string]bool{}
	for _, a := range answers {
		if !slices.Contains(c.SuspendIDs, a.SuspendID) {
			return Applied{}, fmt.Errorf("%w: %s", ErrNotInToken, a.SuspendID)
		}
		if seen[a.SuspendID] {
			return Applied{}, fmt.Errorf("%w: %s answered twice", ErrInvalidAnswer, a.SuspendID)
		}
		seen[a.SuspendID] = true
		if !pending[a.SuspendID] {
			out.Resolved = append(out.Resolved, a.SuspendID)
			continue
		}
		in, err := input(a, by)
		if err != nil {
			return Applied{}, err
		}
		if ri, ok := in.(machine.ResumeInput); ok {
			if err := m.CheckPayload(ri); err != nil {
				rejected.Violations = append(rejected.Violations, Violation{SuspendID: a.SuspendID, Err: err})
				continue
			}
		}
		out.Inputs = append(out.Inputs, in)
	}
	if len(rejected.Violations) > 0 {
		return Applied{}, &rejected
	}
	return out, nil
}

// input is the machine input of answer a.
func input(a Answer, by string) (machine.Input, error) {
	switch a.Action {
	case "", Accept:
		var payload any
		if len(a.Payload) > 0 {
			payload = a.Payload
		}
		return machine.ResumeInput{SuspendID: a.SuspendID, Payload: payload, By: by}, nil
	case Decline:
		reason := a.Reason
		if reason == "" {
			reason = "declined"
		}
		return machine.ResumeInput{SuspendID: a.SuspendID, Payload: reason, IsError: true, By: by}, nil
	case Cancel:
		return machine.CancelInput{SuspendID: a.SuspendID, Reason: a.Reason, By: by}, nil
	}
	return nil, fmt.Errorf("%w: action %q of %s: want accept, decline or cancel", ErrInvalidAnswer, a.Action, a.SuspendID)
}

// Violation is one rejected answer.
type Violation struct {
	SuspendID string
	Err       error
}

// RejectedError reports answers their suspensions' schemas refuse; none
// of the set was applied.
type RejectedError struct{ Violations []Violation }

func (e *RejectedError) Error() string {
	msg := "bridge: answer rejected"
	for _, v := range e.Violations {
		msg += "; " + v.Err.Error()
	}
	return msg
}

// Unwrap returns the violations' errors (each wraps
// instance.ErrPayloadDecode).
func (e *RejectedError) Unwrap() []error {
	out := make([]error, len(e.Violations))
	for i, v := range e.Violations {
		out[i] = v.Err
	}
	return out
}

// ViolationText is the text for a person of a payload a schema refused
// (an *instance.PayloadError): the field and what is wrong with it.
func ViolationText(err error) string {
	pe, ok := errors.AsType[*instance.PayloadError](err)
	switch {
	case !ok:
		return err.Error()
	case pe.Field == "":
		return pe.Violation
	}
	return pe.Field + ": " + pe.Violation
}

// LastAnswer is the text of the last assistant message of msgs that has
// text: what a protocol shows as a run's answer.
func LastAnswer(msgs []message.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.Assistant {
			if t := msgs[i].Text(); t != "" {
				return t
			}
		}
	}
	return ""
}
