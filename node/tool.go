package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Tool is a model-invoked operation on instances of a node with state S.
// Build it with NewTool.
type Tool[S any] struct{ t *frame.Tool }

// Name returns the tool's name ("" for the zero Tool).
func (t Tool[S]) Name() string {
	if t.t == nil {
		return ""
	}
	return t.t.Spec.Name
}

// ToolContext is what a tool handler sees. It embeds the run's
// context.Context.
type ToolContext[S any] struct {
	context.Context
	f *frame.Frame
}

func newToolContext[S any](f *frame.Frame) *ToolContext[S] {
	return &ToolContext[S]{Context: f.Context, f: f}
}

// State returns a copy of the current state: the state the previous tool of
// the same reply left. Writes to the copy are not kept; change the state
// through Update.
func (c *ToolContext[S]) State() S { return frame.State[S](c.f) }

// Update applies fn to a copy of the state and, if the result validates,
// makes it the new state. It fails with instance.ErrReadOnly where the
// state is not the tool's to write (ancestor tools, concurrent tools, pack
// state from a worker).
func (c *ToolContext[S]) Update(fn func(*S)) error { return frame.Update(c.f, fn) }

// InstanceID returns the calling instance's ID.
func (c *ToolContext[S]) InstanceID() string { return c.f.InstanceID }

// IdempotencyKey returns the call's idempotency key: the same on every
// retry of the same call, different for every other call, so the handler
// can make its external effect idempotent (send it as a payment API's
// Idempotency-Key, or insert it under a unique constraint). In a tool
// handler it is the machine's root ID and the tool-use ID
// ("ROOT/TOOLUSEID"); in a resume handler (OnResume), the root ID, the
// suspension ID and the stage ("ROOT/resume/SUSPENDID/STAGE").
//
// A tool runs again only if its process died (or lost the machine) after
// the model's reply was saved and before the round's results were: then
// it runs with the same key. See "Effectively-once side effects" in
// docs/ARCHITECTURE.md.
func (c *ToolContext[S]) IdempotencyKey() string { return c.f.Key() }

// Messages returns the calling leaf's transcript. Do not modify it.
func (c *ToolContext[S]) Messages() []message.Message { return c.f.Messages }

// Suspend returns the suspension to hand back from the handler:
//
//	return zero, ctx.Suspend("needs manager approval", instance.WithMetadata(req))
//
// The call's result is then the payload of the ResumeInput that resolves
// it (or what the tool's OnResume handler makes of it).
func (c *ToolContext[S]) Suspend(reason string, opts ...instance.SuspendOption) error {
	return frame.Suspend(reason, opts)
}

// ToolOption configures a tool.
type ToolOption interface{ apply(*frame.Tool) }

type toolOption func(*frame.Tool)

func (o toolOption) apply(t *frame.Tool) { o(t) }

// Concurrent lets the tool run concurrently with the other concurrent tools
// of the same reply. Such a tool reads the state as it was before the reply
// and may not update it (I/O-bound calls: fetches, lookups).
func Concurrent() ToolOption { return toolOption(func(t *frame.Tool) { t.Concurrent = true }) }

// Terminal ends the turn after the tool runs: its result is final and the
// model is not called again until new input arrives.
func Terminal() ToolOption { return toolOption(func(t *frame.Tool) { t.Terminal = true }) }

// Timeout bounds each call of the tool, and of its resume handler, to d,
// in place of the charter's default (machine.CharterConfig.ToolTimeout).
// The handler's context is cancelled at d; a call that has not returned
// by then becomes the error result "tool NAME timed out after D", the
// model sees it and the round goes on. A handler that ignores its context
// is abandoned: what it returns or writes afterwards is discarded. d must
// be positive.
func Timeout(d time.Duration) ToolOption {
	return toolOption(func(t *frame.Tool) {
		if d <= 0 {
			t.Err = fmt.Errorf("timeout %s is not positive", d)
			return
		}
		t.Timeout = d
	})
}

// Resumed is what a resume handler receives: the resolution — why the
// call was resolved (Cause), by whom, at which stage — with its payload
// decoded into P.
type Resumed[P any] struct {
	instance.Resolution
	// Payload is the resume payload decoded into P. It is the zero P for an
	// error resolution (IsError), whose payload is free-form:
	// Resolution.Text() reads it. It shadows the raw Resolution.Payload.
	Payload P
}

// OnResume registers a resume handler: when a suspension of this tool is
// resumed, fn receives the original typed input and the resolution with
// its payload decoded, and returns the real result, or suspends again
// through ctx.Suspend (multi-stage approval). In must be the tool's input
// type.
//
// P is the payload type, and OnResume declares it as ResumeWith[P] does:
// its schema is recorded on every suspension of the tool, and a payload
// that does not fit is refused before the suspension is consumed, so the
// handler always receives a P. P = json.RawMessage declares nothing and
// hands the handler the payload as JSON, whatever it is.
func OnResume[S, In, P, Out any](fn func(ctx *ToolContext[S], in In, r Resumed[P]) (Out, error)) ToolOption {
	return onResume(newToolContext[S], fn)
}

// onResume is OnResume for a handler with context C (a node's or a
// pack's tool context).
func onResume[C, In, P, Out any](mk func(*frame.Frame) C, fn func(ctx C, in In, r Resumed[P]) (Out, error)) ToolOption {
	return toolOption(func(t *frame.Tool) {
		if t.InType != reflect.TypeFor[In]() {
			t.Err = fmt.Errorf("OnResume input %s does not match tool input %s", reflect.TypeFor[In](), t.InType)
			return
		}
		if reflect.TypeFor[P]() != reflect.TypeFor[json.RawMessage]() {
			ResumeWith[P]().apply(t)
		}
		t.Resume = func(f *frame.Frame, input json.RawMessage, r instance.Resolution) (any, error) {
			in, err := instance.Decode[In](input)
			if err != nil {
				return nil, err
			}
			rp := Resumed[P]{Resolution: r}
			if !r.IsError {
				if rp.Payload, err = instance.Decode[P](r.Payload); err != nil {
					return nil, err
				}
			}
			return frame.Result(fn(mk(f), in, rp))
		}
	})
}

// ResumeWith declares P as the payload type the tool's suspensions accept
// on resume. Its JSON Schema is inferred as for tool inputs and recorded on
// every suspension of the tool (instance.SuspendedCall.PayloadSchema, for
// a UI to render a form); a resume whose payload the schema rejects fails
// with an *instance.PayloadError before the suspension is consumed, and
// changes nothing. Error payloads (IsError) stay free-form. A string
// payload is a JSON string, so P = string accepts text. On-timeout
// payloads (instance.OnTimeoutResume) are checked when the tool suspends.
// A tool with a resume handler declares its payload type there
// (OnResume's P); ResumeWith is for a tool without one, whose result is
// the payload itself. Declaring two different types is an error.
func ResumeWith[P any]() ToolOption {
	return toolOption(func(t *frame.Tool) {
		p := reflect.TypeFor[P]()
		if t.PayloadType != nil {
			if t.PayloadType != p {
				t.Err = fmt.Errorf("resume payload declared as both %s and %s", t.PayloadType, p)
			}
			return
		}
		s, err := frame.PayloadSchemaFor[P]()
		if err != nil {
			t.Err = fmt.Errorf("ResumeWith: %w", err)
			return
		}
		t.Payload, t.PayloadType = s, p
	})
}

// NewTool returns a tool. Its input schema is inferred from In (a struct or
// map; use `json` and `jsonschema` field tags for names and descriptions)
// and every input is validated against it before fn runs. The result is
// sent to the model as is when Out is a string, as JSON otherwise. A
// returned error, a bad input or a panic becomes an error result the model
// sees. A construction error is reported when the node is built.
func NewTool[S, In, Out any](name, description string, fn func(ctx *ToolContext[S], in In) (Out, error), opts ...ToolOption) Tool[S] {
	return Tool[S]{newTool(name, description, newToolContext[S], fn, opts)}
}

func newTool[C, In, Out any](name, description string, mk func(*frame.Frame) C, fn func(C, In) (Out, error), opts []ToolOption) *frame.Tool {
	t := &frame.Tool{
		Spec:   llm.ToolSpec{Name: name, Description: description},
		InType: reflect.TypeFor[In](),
	}
	var schema *frame.Schema
	var err error
	if raw, ok := givenSchema(opts); ok {
		var top struct {
			Type any `json:"type"`
		}
		if err = json.Unmarshal(raw, &top); err == nil && top.Type != "object" {
			err = errors.New(`input schema must be of "type": "object"`)
		}
		if err == nil {
			schema, err = frame.ParseSchema(raw)
		}
	} else {
		schema, err = frame.SchemaFor[In]()
	}
	if err != nil {
		t.Err = err
		return t
	}
	t.Spec.InputSchema = schema.Raw
	t.Run = frame.Bind(schema, mk, fn)
	for _, o := range opts {
		o.apply(t)
	}
	return t
}

// inputSchema is the option InputSchema returns; newTool reads it
// before it builds the tool.
type inputSchema json.RawMessage

func (inputSchema) apply(*frame.Tool) {}

// InputSchema gives the tool the JSON Schema schema as its input schema,
// in place of the one inferred from its input type, which must then be
// json.RawMessage or a map: the model is shown schema and every input is
// validated against it before the handler runs. schema must describe an
// object ("type": "object") and compile; otherwise building the node
// fails. It is for tools whose schema is known only at run time (a remote
// server's tools).
func InputSchema(schema json.RawMessage) ToolOption { return inputSchema(bytes.Clone(schema)) }

// givenSchema returns the schema of the last InputSchema among opts.
func givenSchema(opts []ToolOption) (json.RawMessage, bool) {
	var raw json.RawMessage
	found := false
	for _, o := range opts {
		if s, ok := o.(inputSchema); ok {
			raw, found = json.RawMessage(s), true
		}
	}
	return raw, found
}

func (t Tool[S]) frameTool() *frame.Tool { return t.t }

func (t Tool[S]) edgeTargets() []string { return nil }

func (t Tool[S]) carried() reflect.Type { return nil }

// erasedTool is what every Tool[S] is, whatever S.
type erasedTool interface{ erased() *frame.Tool }

// erased returns the type-erased form of t, one whose Err says so for the
// zero Tool.
func (t Tool[S]) erased() *frame.Tool {
	if t.t == nil {
		return &frame.Tool{Err: errors.New("zero Tool")}
	}
	return t.t
}

// ToolInfo describes a tool of a node or pack as the model sees it, with
// its options. It is a copy: changing it changes nothing.
type ToolInfo struct {
	// Spec is the name, description and input schema sent to the model.
	Spec llm.ToolSpec
	// Transition marks a transition (node.To, NewTransition, Ceder).
	Transition bool
	// Concurrent and Terminal report the options of the same names.
	Concurrent, Terminal bool
	// Timeout is the tool's own timeout (zero: the charter's default).
	Timeout time.Duration
	// PayloadSchema is the JSON Schema of the resume payloads the tool's
	// suspensions accept (ResumeWith); nil accepts any payload.
	PayloadSchema json.RawMessage
	// Resumable reports a resume handler (OnResume).
	Resumable bool
}

// toolInfos describes ts.
func toolInfos(ts []*frame.Tool) []ToolInfo {
	out := make([]ToolInfo, len(ts))
	for i, t := range ts {
		out[i] = ToolInfo{
			Spec:       llm.ToolSpec{Name: t.Spec.Name, Description: t.Spec.Description, InputSchema: bytes.Clone(t.Spec.InputSchema)},
			Transition: t.Transition, Concurrent: t.Concurrent, Terminal: t.Terminal, Timeout: t.Timeout,
			Resumable: t.Resume != nil,
		}
		if t.Payload != nil {
			out[i].PayloadSchema = bytes.Clone(t.Payload.Raw)
		}
	}
	return out
}

// commandInfos describes cs.
func commandInfos(cs []*frame.Command) []command.Info {
	out := make([]command.Info, len(cs))
	for i, c := range cs {
		out[i] = command.Info{Name: c.Name, Description: c.Description, InputSchema: bytes.Clone(c.InputSchema)}
		if c.Payload != nil {
			out[i].PayloadSchema = bytes.Clone(c.Payload.Raw)
		}
	}
	return out
}
