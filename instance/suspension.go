package instance

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/looplab/fsm"

	"github.com/markov-agents/markov/message"
)

// CallKind says what kind of call a suspension parks.
type CallKind string

// The kinds of suspended call.
const (
	// KindTool: a tool call of a model reply; its payload becomes the tool
	// result.
	KindTool CallKind = "tool"
	// KindCommand: a command; its payload becomes the command's result.
	KindCommand CallKind = "command"
	// KindInstance: the whole instance is parked (by a transition or the
	// caller); its payload, if any, reaches the instance as a message.
	KindInstance CallKind = "instance"
)

// Initiator says who asked for a suspension.
type Initiator string

// The initiators of a suspension.
const (
	ByTool       Initiator = "tool"
	ByCommand    Initiator = "command"
	ByTransition Initiator = "transition"
	ByCaller     Initiator = "caller"
)

// Status is the lifecycle state of a suspended call.
type Status string

// The lifecycle: pending → resolved | expired | cancelled.
const (
	StatusPending   Status = "pending"
	StatusResolved  Status = "resolved"
	StatusExpired   Status = "expired"
	StatusCancelled Status = "cancelled"
)

// Lifecycle events that move a call out of pending.
const (
	eventResolve = "resolve"
	eventExpire  = "expire"
	eventCancel  = "cancel"
)

// moves is the lifecycle's transition table, read off one looplab/fsm
// machine built from the lifecycle's events at init: moves[status][event]
// is the status the event leads to, absent when the FSM refuses the move.
// The FSM stays the single definition of the lifecycle; calls look their
// moves up instead of building an FSM per transition.
var moves = lifecycleMoves(fsm.Events{
	{Name: eventResolve, Src: []string{string(StatusPending)}, Dst: string(StatusResolved)},
	{Name: eventExpire, Src: []string{string(StatusPending)}, Dst: string(StatusExpired)},
	{Name: eventCancel, Src: []string{string(StatusPending)}, Dst: string(StatusCancelled)},
})

// lifecycleMoves fires every event from every status on one FSM and
// records where each accepted event leads.
func lifecycleMoves(events fsm.Events) map[Status]map[string]Status {
	m := fsm.NewFSM(string(StatusPending), events, nil)
	table := map[Status]map[string]Status{}
	for _, from := range []Status{StatusPending, StatusResolved, StatusExpired, StatusCancelled} {
		table[from] = map[string]Status{}
		for _, e := range events {
			m.SetState(string(from))
			if m.Event(context.Background(), e.Name) == nil {
				table[from][e.Name] = Status(m.Current())
			}
		}
	}
	return table
}

// TimeoutAction is what happens when a suspension's deadline passes.
type TimeoutAction struct {
	// Resume, when true, resolves the call with Payload (IsError marking it
	// an error; Deny marking it a refusal, OnTimeoutDeny). Otherwise the call fails with an error result naming the
	// deadline, unless Summarize is set.
	Resume  bool
	Payload json.RawMessage
	IsError bool
	// Summarize, when true (and Resume false), resolves the call with a
	// summary: the model is told the wait timed out and what was pending
	// (TimeoutSummary). Set by OnTimeoutSummary.
	Summarize bool
	// Deny, with Resume, makes the deadline's resolution a refusal: the
	// resume handler gets Payload as a decision with Deny set
	// (Resolution.Decisions) and the audit log records it denied.
	Deny bool
}

// SuspendedCall is one pending external result: a tool call, a command, or
// a whole-instance suspension. Input, Metadata and payloads are raw JSON,
// decoded on demand with Decode, so types survive a restart.
type SuspendedCall struct {
	SuspendID  string
	InstanceID string
	// ToolUseID is the model's tool-use ID (KindTool only).
	ToolUseID string
	Kind      CallKind
	Initiator Initiator
	// Name is the tool or command name.
	Name        string
	Input       json.RawMessage
	Metadata    json.RawMessage
	Reason      string
	SuspendedAt time.Time
	// Deadline is zero when the suspension never expires.
	Deadline  time.Time
	OnTimeout TimeoutAction
	Status    Status
	// Stage counts re-suspensions of the same call by a resume handler,
	// starting at 0.
	Stage int
	// Event, when set, is the named event the call also waits for: a
	// durable runner's Signal of that name resumes it (WithEvent).
	Event string
	// PayloadSchema is the JSON Schema a resume payload must satisfy,
	// inferred from the payload type the tool or command declared
	// (node.ResumeWith, command.ResumeWith); empty when any payload goes.
	// A payload it rejects fails the resume with a *PayloadError and
	// changes nothing. Error payloads (IsError) are not checked.
	PayloadSchema json.RawMessage
	// TraceParent is the W3C traceparent of the span in which the call
	// was suspended ("00-<trace ID>-<span ID>-<flags>"), empty when the
	// run was not traced. The run that resolves the call carries a span
	// link to it, so a trace shows the wait, across processes too.
	TraceParent string
	// Policy, when set, governs who may decide the call (WithPolicy);
	// Decisions are those recorded so far, oldest first, while the quorum
	// is not reached.
	Policy    *Policy
	Decisions []Decision
	// Digest identifies what a decision decides (CallDigest: node, name,
	// input, policy version). A decision naming another is stale.
	Digest string
	// InputSchema is the JSON Schema of the tool's or command's input,
	// recorded on a call whose policy allows edits (Policy.AllowEdit): an
	// edited input must satisfy it.
	InputSchema json.RawMessage
	// RemindAt is when the call's next reminder is due (Policy.Remind),
	// zero when none is.
	RemindAt time.Time
}

// Expired reports whether the call is pending with a deadline at or before
// now.
func (c *SuspendedCall) Expired(now time.Time) bool {
	return c.Status == StatusPending && !c.Deadline.IsZero() && !now.Before(c.Deadline)
}

// transition moves the call's status through the lifecycle (moves). An
// invalid move (a double resume) wraps ErrAlreadyResolved and changes
// nothing.
func (c *SuspendedCall) transition(event string) error {
	to, ok := moves[c.Status][event]
	if !ok {
		return fmt.Errorf("suspension %s is %s: %w", c.SuspendID, c.Status, ErrAlreadyResolved)
	}
	c.Status = to
	return nil
}

// CheckPending returns nil when the call can still be resolved, and an
// error wrapping ErrAlreadyResolved otherwise.
func (c *SuspendedCall) CheckPending() error {
	if c.Status != StatusPending {
		return fmt.Errorf("suspension %s is %s: %w", c.SuspendID, c.Status, ErrAlreadyResolved)
	}
	return nil
}

// Resolve marks the call resolved.
func (c *SuspendedCall) Resolve() error { return c.transition(eventResolve) }

// Expire marks the call expired.
func (c *SuspendedCall) Expire() error { return c.transition(eventExpire) }

// Cancel marks the call cancelled.
func (c *SuspendedCall) Cancel() error { return c.transition(eventCancel) }

// Clone returns a deep copy of c.
func (c SuspendedCall) Clone() SuspendedCall {
	c.Input = cloneRaw(c.Input)
	c.Metadata = cloneRaw(c.Metadata)
	c.OnTimeout.Payload = cloneRaw(c.OnTimeout.Payload)
	c.PayloadSchema = cloneRaw(c.PayloadSchema)
	c.InputSchema = cloneRaw(c.InputSchema)
	if c.Policy != nil {
		p := c.Policy.Clone()
		c.Policy = &p
	}
	if c.Decisions != nil {
		ds := make([]Decision, len(c.Decisions))
		for i, d := range c.Decisions {
			d.Groups = append([]string(nil), d.Groups...)
			d.Payload = cloneRaw(d.Payload)
			d.Edit = cloneRaw(d.Edit)
			ds[i] = d
		}
		c.Decisions = ds
	}
	return c
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// HeldReply is a model reply parked until every call it made is resolved.
// The assistant message and its results enter history together, so history
// never holds an unanswered tool use.
type HeldReply struct {
	// Message is the assistant message with its tool uses.
	Message message.Message
	// Results has one slot per tool use, in tool-use order; a pending slot
	// has Kind 0.
	Results []message.Part
	// Transition is the transition requested in the same reply, applied
	// once every call is resolved.
	Transition *Effect
	// Terminal ends the turn after the resume without another model call.
	Terminal bool
	// Deferred is user input that arrived while the reply was held. It
	// enters history after the reply and its results, so the model sees
	// its own action before the words that came later.
	Deferred []message.Message
}

// SuspensionState is everything an instance waits for.
type SuspensionState struct {
	// Calls are the suspended calls in suspension order, pending and
	// resolved; the record is dropped when none is pending.
	Calls []SuspendedCall
	// Reply is the held model reply, when tool calls suspended.
	Reply *HeldReply
}

// PendingCount returns the number of pending calls.
func (s *SuspensionState) PendingCount() int {
	n := 0
	for i := range s.Calls {
		if s.Calls[i].Status == StatusPending {
			n++
		}
	}
	return n
}

// Clone returns a deep copy of s.
func (s *SuspensionState) Clone() *SuspensionState {
	out := &SuspensionState{Calls: make([]SuspendedCall, len(s.Calls))}
	for i, c := range s.Calls {
		out.Calls[i] = c.Clone()
	}
	if s.Reply != nil {
		r := *s.Reply
		r.Message = r.Message.Clone()
		r.Results = cloneParts(r.Results)
		r.Deferred = message.CloneAll(r.Deferred)
		if r.Transition != nil {
			t := *r.Transition
			r.Transition = &t
		}
		out.Reply = &r
	}
	return out
}

// Resolution is the outcome handed to a resume handler: the payload and
// why the call was resolved.
type Resolution struct {
	SuspendID string
	// Payload is the resume payload as JSON (a string payload is a JSON
	// string).
	Payload json.RawMessage
	IsError bool
	// Metadata is the suspension's metadata.
	Metadata json.RawMessage
	// Stage counts earlier re-suspensions of this call.
	Stage int
	// Cause says what resolved the call: a decision (CauseExplicit, a
	// ResumeInput), a command (CauseCommand, command.Context.Resume),
	// the deadline's on-timeout payload (CauseTimeout) or a signal
	// (CauseEvent). A cancellation, and a deadline without an on-timeout
	// payload, resolve the call as a failure without the resume handler.
	Cause Cause
	// By names who decided (ResumeInput.By), when the caller said.
	By string
	// Signal is the event that resumed the call (Cause CauseEvent).
	Signal string
	// Command is the command that resolved the call (Cause CauseCommand).
	Command string
	// Decisions are the decisions of a governed call (WithPolicy), the
	// one that settled it last.
	Decisions []Decision
}

// Text returns the payload as text: a JSON string as the string itself,
// anything else as its JSON. An error resolution's (IsError) payload is
// free-form, and Text is how to read it.
func (r Resolution) Text() string {
	if len(r.Payload) > 0 && r.Payload[0] == '"' {
		var s string
		if json.Unmarshal(r.Payload, &s) == nil {
			return s
		}
	}
	return string(r.Payload)
}

// Decode decodes raw JSON (a payload, metadata or a call's input) into T.
// Failures wrap ErrPayloadDecode.
func Decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		return v, fmt.Errorf("empty value: %w", ErrPayloadDecode)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("%w: %v", ErrPayloadDecode, err)
	}
	return v, nil
}

// EncodePayload returns v as JSON. Raw JSON (json.RawMessage) must be
// valid and passes through. A []byte that is valid JSON passes through
// too (a webhook body handed over as is); any other []byte is text and
// becomes a JSON string, and fails when it is not valid UTF-8. Anything
// else is marshalled. Failures wrap ErrPayloadDecode.
func EncodePayload(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(p) {
			return nil, fmt.Errorf("raw payload is not valid JSON: %w", ErrPayloadDecode)
		}
		return cloneRaw(p), nil
	case []byte:
		if json.Valid(p) {
			return cloneRaw(p), nil
		}
		if !utf8.Valid(p) {
			return nil, fmt.Errorf("byte payload is neither JSON nor UTF-8 text: %w", ErrPayloadDecode)
		}
		v = string(p)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPayloadDecode, err)
	}
	return b, nil
}

// ResultText turns a payload into tool-result text: a string payload is the
// result as is, anything else its JSON.
func ResultText(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := EncodePayload(v)
	return string(b), err
}

// NewID returns a random, unguessable identifier with the given prefix
// (128 bits from crypto/rand, base32).
func NewID(prefix string) string {
	return prefix + rand.Text()
}
