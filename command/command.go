// Package command defines user-invoked commands: typed operations on a node
// instance that run without a model call. A command may update state,
// transition, spawn, cede, suspend, and resolve pending suspensions; its
// effects go through the same validated effect path as tools.
package command

import (
	"context"
	"encoding/json"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
)

// Command is a user-invoked operation on instances of a node with state S.
// Build it with New.
type Command[S any] struct{ c *frame.Command }

func init() {
	access.CommandOf = func(v any) *frame.Command { return v.(erased).erased() }
}

// erased is what every Command[S] is, whatever S.
type erased interface{ erased() *frame.Command }

func (c Command[S]) erased() *frame.Command { return c.c }

// options is what Options set.
type options struct {
	// payload is the schema of the resume payloads (ResumeWith).
	payload *frame.Schema
	err     error
}

// Option configures a command.
type Option func(*options)

// ResumeWith declares P as the payload type the command's suspensions
// accept on resume, as node.ResumeWith does for tools: the schema is
// recorded on every suspension, and a payload it rejects — given in a
// ResumeInput or by another command's Context.Resume — fails before the
// suspension is consumed, changing nothing. Error payloads stay free-form.
func ResumeWith[P any]() Option {
	return func(o *options) {
		o.payload, o.err = frame.PayloadSchemaFor[P]()
	}
}

// New returns a command. Its input schema is inferred from In, which must be
// a struct or map; inputs are validated against it before fn runs. A
// construction error is reported when the node is built.
func New[S, In, Out any](name, description string, fn func(ctx *Context[S], in In) (Out, error), opts ...Option) Command[S] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	c := &frame.Command{Name: name, Description: description, Payload: o.payload}
	schema, err := frame.SchemaFor[In]()
	switch {
	case err != nil:
		c.Err = err
	case o.err != nil:
		c.Err = o.err
	default:
		c.InputSchema = schema.Raw
		c.Run = frame.Bind(schema, newContext[S], fn)
	}
	return Command[S]{c}
}

// Name returns the command's name ("" for the zero Command).
func (c Command[S]) Name() string {
	if c.c == nil {
		return ""
	}
	return c.c.Name
}

// Description returns the command's description.
func (c Command[S]) Description() string {
	if c.c == nil {
		return ""
	}
	return c.c.Description
}

// Info describes a command to a user or a frontend: a copy, so changing it
// changes nothing.
type Info struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the command's input.
	InputSchema json.RawMessage
	// PayloadSchema is the JSON Schema of the resume payloads the
	// command's suspensions accept (ResumeWith); nil accepts any payload.
	PayloadSchema json.RawMessage
}

// Context is what a command handler sees: the target instance's state and
// the effects it may request. It embeds the run's context.Context.
type Context[S any] struct {
	context.Context
	f *frame.Frame
}

func newContext[S any](f *frame.Frame) *Context[S] {
	return &Context[S]{Context: f.Context, f: f}
}

// State returns a copy of the instance's current state. Writes to the copy
// are not kept, even when the command succeeds; change the state through
// Update.
func (c *Context[S]) State() S { return frame.State[S](c.f) }

// Update applies fn to a copy of the state and, if the result validates,
// makes it the new state. On error the state is unchanged.
func (c *Context[S]) Update(fn func(*S)) error { return frame.Update(c.f, fn) }

// InstanceID returns the target instance's ID.
func (c *Context[S]) InstanceID() string { return c.f.InstanceID }

// IdempotencyKey returns the invocation's idempotency key, the machine's
// root ID and the caller's invocation ID ("ROOT/command/ID"): the same on
// every retry of the invocation, for the handler to make its external
// effect idempotent. It is "" when the invocation has no ID
// (Invocation.ID).
func (c *Context[S]) IdempotencyKey() string { return c.f.Key() }

// Suspend returns the suspension to hand back from the handler:
//
//	return zero, ctx.Suspend("awaiting sign-off", instance.WithTimeout(time.Hour))
//
// The command then completes when the suspension is resumed; the resume
// payload becomes its result.
func (c *Context[S]) Suspend(reason string, opts ...instance.SuspendOption) error {
	return frame.Suspend(reason, opts)
}

// TransitionTo replaces the instance's node with target once the command
// returns; a nil state means the target's initial state.
func (c *Context[S]) TransitionTo(target string, state any) {
	e := instance.Goto(target, state)
	c.f.Effect = &e
}

// Spawn appends a child instance of target once the command returns; a nil
// state means the target's initial state. Several calls spawn several
// children.
func (c *Context[S]) Spawn(target string, state any) {
	child := instance.Child{Node: target, State: state}
	if c.f.Effect != nil && c.f.Effect.Kind == instance.EffectSpawn {
		c.f.Effect.Children = append(c.f.Effect.Children, child)
		return
	}
	e := instance.Spawn(child)
	c.f.Effect = &e
}

// Cede removes the instance once the command returns and hands content to
// its parent.
func (c *Context[S]) Cede(content any) {
	e := instance.Cede(content)
	c.f.Effect = &e
}

// Resume resolves the pending suspension suspendID with payload once the
// command returns. The resume is validated with the command's other
// effects: an unknown or resolved ID fails the whole command.
func (c *Context[S]) Resume(suspendID string, payload any) error {
	if suspendID == "" {
		return instance.ErrUnknownSuspendID
	}
	c.f.Resumes = append(c.f.Resumes, frame.Resume{SuspendID: suspendID, Payload: payload})
	return nil
}

// Invocation asks a machine to run a command.
type Invocation struct {
	// Name is the command name.
	Name string
	// Input is the command input: any JSON-encodable value, or raw JSON.
	Input any
	// InstanceID targets an instance; empty means the primary leaf.
	InstanceID string
	// ID is the caller's stable identity of this invocation, the same on
	// every retry of it (a request ID, an outbox row's key): the handler's
	// Context.IdempotencyKey is built from it. Empty gives no key.
	ID string
}

// Invoke returns an invocation of name with input for the primary leaf.
func Invoke(name string, input any) Invocation {
	return Invocation{Name: name, Input: input}
}

// Result is a command's outcome, reported in a Command step.
type Result struct {
	Name       string
	InstanceID string
	// Value is the handler's result, or the resume payload of a command
	// that suspended.
	Value any
	// Suspension is set when the command suspended.
	Suspension *instance.SuspendedCall
}
