package instance

import (
	"encoding/json"
	"fmt"
	"time"
)

// EffectKind says what a transition does to the tree.
type EffectKind uint8

// The kinds of transition effect.
const (
	// EffectNone changes nothing.
	EffectNone EffectKind = iota
	// EffectGoto replaces the instance's node (and state), keeping its ID.
	EffectGoto
	// EffectSpawn appends children.
	EffectSpawn
	// EffectCede removes the instance and hands content to its parent.
	EffectCede
)

// String returns the effect kind's name.
func (k EffectKind) String() string {
	switch k {
	case EffectGoto:
		return "goto"
	case EffectSpawn:
		return "spawn"
	case EffectCede:
		return "cede"
	}
	return "none"
}

// Child describes one instance to spawn.
type Child struct {
	// ID is the new instance's ID; empty means one is generated.
	ID string
	// Node is the node name to spawn.
	Node string
	// State is the child's initial state; nil means the node's Initial.
	State any
}

// Effect is what a transition asks of the tree. Effects are data: the
// executor collects them and the machine validates and applies them.
type Effect struct {
	Kind EffectKind
	// Target is the node of a Goto.
	Target string
	// State is the new state of a Goto; nil means the target's Initial.
	State any
	// Children are the instances of a Spawn.
	Children []Child
	// Content is what a Cede hands to the parent: a string as is, anything
	// else as JSON.
	Content any
}

// Goto returns an effect that replaces the instance's node with target. A
// nil state means the target's initial state; a goto to the instance's own
// node resets its state.
func Goto(target string, state any) Effect {
	return Effect{Kind: EffectGoto, Target: target, State: state}
}

// Spawn returns an effect that appends children.
func Spawn(children ...Child) Effect {
	return Effect{Kind: EffectSpawn, Children: children}
}

// Cede returns an effect that removes the instance and hands content to its
// parent.
func Cede(content any) Effect {
	return Effect{Kind: EffectCede, Content: content}
}

// SuspendRequest is the error a handler returns to suspend: build it with
// the Suspend method of a tool, command or transition context and return
// it as is. The executor turns it into a SuspendedCall.
type SuspendRequest struct {
	// ID is the suspend ID; empty means a random one.
	ID       string
	Reason   string
	Metadata json.RawMessage
	Deadline time.Time
	// Timeout, when positive and Deadline is zero, sets the deadline
	// relative to the suspension time (the charter's clock).
	Timeout   time.Duration
	OnTimeout TimeoutAction
	// Event is the named event the suspension waits for besides an
	// explicit resume (WithEvent); empty: none.
	Event string
	// PayloadSchema is the JSON Schema the resume payload must match
	// (WithPayloadSchema), for a tool or command that declares none.
	PayloadSchema json.RawMessage
	// Policy, when set, governs who may decide the call (WithPolicy).
	Policy *Policy
}

// Error describes the request; a SuspendRequest is a status, not a failure.
func (r *SuspendRequest) Error() string { return "suspended: " + r.Reason }

// SuspendOption configures a suspension.
type SuspendOption func(*SuspendRequest) error

// NewSuspendRequest builds a request from options. An option that fails
// (metadata that does not encode) returns its error instead, and the
// handler then fails rather than suspends.
func NewSuspendRequest(reason string, opts ...SuspendOption) error {
	r := &SuspendRequest{Reason: reason}
	for _, o := range opts {
		if err := o(r); err != nil {
			return err
		}
	}
	return r
}

// WithID sets the suspend ID instead of a random one: an ID the caller
// can know without asking (an order number, a webhook's delivery ID). It
// must be unique across every machine of the store, not only within the
// machine, because a resume finds its suspension by ID alone. A clash is
// refused when the suspension is asked for, before anything is recorded:
// an ID the machine's own tree holds always (executor.ErrDuplicateID),
// one another machine of the store holds under a durable runner
// (machine.Machine.SetSuspendIDCheck). A tool call then gets an error
// result naming the ID; a command fails. Prefix the ID with what it
// belongs to ("refund-order-42") so that two kinds of wait never clash.
func WithID(id string) SuspendOption {
	return func(r *SuspendRequest) error {
		if id == "" {
			return fmt.Errorf("empty suspend ID: %w", ErrInvalidInput)
		}
		r.ID = id
		return nil
	}
}

// MaxPayloadSchema is the size, in bytes, of the largest schema
// WithPayloadSchema takes.
const MaxPayloadSchema = 64 << 10

// WithPayloadSchema sets the JSON Schema the resume payload must match,
// for one suspension: a schema built at run time (a form the model
// describes, the choices it offers). A tool or command that declares its
// payload type (node.ResumeWith, node.OnResume) keeps its own; this one
// applies where none is declared. A schema that does not compile fails
// the call instead of suspending it; a payload it rejects is refused like
// any typed resume's (*PayloadError), and the suspension stays pending.
// A schema over MaxPayloadSchema bytes, or not JSON, fails here with
// ErrInvalidInput.
func WithPayloadSchema(schema json.RawMessage) SuspendOption {
	return func(r *SuspendRequest) error {
		if len(schema) > MaxPayloadSchema {
			return fmt.Errorf("%w: payload schema of %d bytes, over %d", ErrInvalidInput, len(schema), MaxPayloadSchema)
		}
		if !json.Valid(schema) {
			return fmt.Errorf("%w: payload schema is not JSON", ErrInvalidInput)
		}
		r.PayloadSchema = append(json.RawMessage(nil), schema...)
		return nil
	}
}

// WithMetadata attaches any JSON-encodable value, stored as raw bytes and
// decoded with Decode.
func WithMetadata(v any) SuspendOption {
	return func(r *SuspendRequest) (err error) {
		r.Metadata, err = EncodePayload(v)
		return err
	}
}

// WithDeadline sets an absolute deadline. Without an on-timeout option the
// call then fails with an error result.
func WithDeadline(t time.Time) SuspendOption {
	return func(r *SuspendRequest) error {
		r.Deadline = t.UTC()
		return nil
	}
}

// WithTimeout sets the deadline d after the suspension (charter clock).
// Without OnTimeoutResume the call then fails with an error result naming
// the deadline.
func WithTimeout(d time.Duration) SuspendOption {
	return func(r *SuspendRequest) error {
		r.Timeout = d
		return nil
	}
}

// OnTimeoutResume makes an expired suspension resolve with payload instead
// of failing.
func OnTimeoutResume(payload any, isError bool) SuspendOption {
	return func(r *SuspendRequest) error {
		b, err := EncodePayload(payload)
		if err != nil {
			return err
		}
		r.OnTimeout = TimeoutAction{Resume: true, Payload: b, IsError: isError}
		return nil
	}
}

// OnTimeoutDeny makes an expired suspension resolve as a refusal: the
// payload goes through the resume handler as OnTimeoutResume's does, the
// resolution's Decisions hold one refusal by nobody (Decision.Deny, By
// empty), and a durable runner's audit log records the call denied at
// its deadline. It is never a silent continue: the handler and the model
// see the refusal.
func OnTimeoutDeny(payload any) SuspendOption {
	resume := OnTimeoutResume(payload, false)
	return func(r *SuspendRequest) error {
		if err := resume(r); err != nil {
			return err
		}
		r.OnTimeout.Deny = true
		return nil
	}
}

// EventType names a lifecycle event.
type EventType string

// The lifecycle events a Step reports.
const (
	EventSuspended EventType = "suspended"
	EventResumed   EventType = "resumed"
	EventExpired   EventType = "expired"
	EventCancelled EventType = "cancelled"
	// EventEscalated: a governed call's deadline passed and its policy's
	// escalation re-asks it (Policy.Escalation); the call stays pending.
	EventEscalated EventType = "escalated"
	// EventReminded: a governed call's reminder came (Policy.Remind); the
	// call stays pending, its deadline unchanged.
	EventReminded EventType = "reminded"
)

// Cause says what resolved a suspension.
type Cause string

// The causes of a resolution.
const (
	CauseExplicit Cause = "explicit"
	CauseTimeout  Cause = "timeout"
	CauseCommand  Cause = "command"
	CauseCancel   Cause = "cancel"
	// CauseEvent: a signal of the named event the suspension waited for
	// (WithEvent) resumed it — the RFC's "condition_fired".
	CauseEvent Cause = "event"
)

// Event is a suspension lifecycle event.
type Event struct {
	Type       EventType `json:"type"`
	SuspendID  string    `json:"suspend_id"`
	InstanceID string    `json:"instance_id"`
	Kind       CallKind  `json:"kind"`
	Name       string    `json:"name,omitempty"`
	// Initiator is who suspended the call (for a resolution too).
	Initiator Initiator `json:"initiator,omitempty"`
	// Reason is set for EventSuspended.
	Reason string `json:"reason,omitempty"`
	// Cause and HadPayload are set for resolutions.
	Cause      Cause `json:"cause,omitempty"`
	HadPayload bool  `json:"had_payload,omitempty"`
	// Signal is the event name that resumed the call (Cause CauseEvent).
	Signal string `json:"signal,omitempty"`
	// By names who decided a resolution, when the caller said
	// (machine.ResumeInput.By, CancelInput.By, SignalInput.By).
	By string `json:"by,omitempty"`
	// FreshTurn reports a resume with transcript continuation off: the
	// instance goes on in a fresh turn that sees a digest of its earlier
	// transcript (the RFC's continueTranscript false).
	FreshTurn bool      `json:"fresh_turn,omitempty"`
	At        time.Time `json:"at"`
}
