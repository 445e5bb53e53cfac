// Package frame is the type-erased plumbing between typed handlers (tools,
// commands, transitions, pack tools) and the executor: the mutable scope one
// handler call runs in, compiled input schemas, and state copy helpers.
package frame

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// StateOps are the typed operations on one state type.
type StateOps struct {
	// Validate checks a state value (type and the user's validation).
	Validate func(any) error
	// Clone deep-copies a state value.
	Clone func(any) any
}

// Resume is a command's request to resolve a pending suspension.
type Resume struct {
	SuspendID string
	Payload   any
	IsError   bool
}

// Frame is the scope of one handler call.
type Frame struct {
	context.Context
	InstanceID string
	// State is the state the handler reads and, unless ReadOnly, replaces.
	State    any
	Ops      StateOps
	ReadOnly bool
	// Dirty is set once the handler replaced State.
	Dirty bool
	// Messages is the calling leaf's transcript (tools only).
	Messages []message.Message
	// Effect is a transition a command requested.
	Effect *instance.Effect
	// Resumes are suspensions a command resolves.
	Resumes []Resume
	// KeyScope and KeyID make the handler call's idempotency key (Key):
	// the machine's root ID and the call's stable ID within it.
	KeyScope, KeyID string
	// Journal is the machine's effect journal (nil: effects just run);
	// effects are the names of the effects the call ran (Effect).
	Journal instance.EffectJournal
	effects map[string]bool
}

// Key returns the idempotency key of the handler call: KeyScope/KeyID, or
// "" when the call has no stable ID. Joined on demand, so a tool that never
// asks allocates nothing.
func (f *Frame) Key() string {
	if f.KeyID == "" {
		return ""
	}
	return f.KeyScope + "/" + f.KeyID
}

// State returns a deep copy of the frame's state as S (the zero S if it
// holds another type). Handlers never hold the frame's own value, so a write
// through what State returned — a map entry, a slice element — changes
// nothing: Update is the only way to change the state, and a handler that
// fails, or is abandoned after a timeout, leaves it as it was.
func State[S any](f *Frame) S {
	s, _ := f.Ops.Clone(f.State).(S)
	return s
}

// Update applies fn to a copy of the state, validates the result and
// replaces the state with it. On error nothing changes.
func Update[S any](f *Frame, fn func(*S)) error {
	if f.ReadOnly {
		return instance.ErrReadOnly
	}
	s, _ := f.Ops.Clone(f.State).(S)
	fn(&s)
	if err := f.Ops.Validate(s); err != nil {
		return err
	}
	f.State = s
	f.Dirty = true
	return nil
}

// OpsFor returns the state operations of S with the user's validation.
func OpsFor[S any](validate func(S) error) StateOps {
	return StateOps{
		Validate: func(v any) error {
			s, ok := v.(S)
			if !ok {
				return fmt.Errorf("%w: have %T, want %s", instance.ErrInvalidState, v, reflect.TypeFor[S]())
			}
			if validate != nil {
				if err := validate(s); err != nil {
					return fmt.Errorf("%w: %w", instance.ErrInvalidState, err)
				}
			}
			return nil
		},
		Clone: ClonerFor[S](),
	}
}

// ClonerFor returns a deep-copy function for values of S: the identity for
// types without references (copying the value is a deep copy), a
// reflective deep copy otherwise.
func ClonerFor[S any]() func(any) any {
	if plain(reflect.TypeFor[S](), 0) {
		return func(v any) any { return v }
	}
	return DeepCopy
}

// maxCopyDepth bounds DeepCopy on cyclic or absurdly deep values: deeper
// references are shared.
const maxCopyDepth = 1000

// DeepCopy returns a copy of v that shares no maps, slices or pointers with
// it (down to maxCopyDepth). Unexported fields are copied as values, so
// references inside them stay shared; interface values keep their dynamic
// types.
func DeepCopy(v any) any {
	if v == nil {
		return nil
	}
	return deepCopy(reflect.ValueOf(v), 0).Interface()
}

func deepCopy(v reflect.Value, depth int) reflect.Value {
	if depth > maxCopyDepth {
		return v
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(deepCopy(v.Elem(), depth+1))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(deepCopy(v.Elem(), depth+1))
		return out
	case reflect.Slice, reflect.Array:
		return copyElems(v, depth)
	case reflect.Map:
		return copyMap(v, depth)
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if f := out.Field(i); f.CanSet() {
				f.Set(deepCopy(v.Field(i), depth+1))
			}
		}
		return out
	}
	return v
}

// copyElems deep-copies a slice or an array, element by element.
func copyElems(v reflect.Value, depth int) reflect.Value {
	var out reflect.Value
	switch {
	case v.Kind() == reflect.Array:
		out = reflect.New(v.Type()).Elem()
	case v.IsNil():
		return v
	default:
		out = reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	}
	for i := range v.Len() {
		out.Index(i).Set(deepCopy(v.Index(i), depth+1))
	}
	return out
}

// copyMap deep-copies a map's values (keys are copied as values).
func copyMap(v reflect.Value, depth int) reflect.Value {
	if v.IsNil() {
		return v
	}
	out := reflect.MakeMapWithSize(v.Type(), v.Len())
	for it := v.MapRange(); it.Next(); {
		out.SetMapIndex(it.Key(), deepCopy(it.Value(), depth+1))
	}
	return out
}

// Plain reports whether values of t hold no references: copying one is a
// deep copy, and == compares them without a panic.
func Plain(t reflect.Type) bool { return plain(t, 0) }

// plain reports whether t holds no references.
func plain(t reflect.Type, depth int) bool {
	if depth > 16 {
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return plain(t.Elem(), depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if !plain(t.Field(i).Type, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// Handler runs a typed handler on raw JSON input.
type Handler func(f *Frame, input json.RawMessage) (any, error)

// ResumeHandler turns a resume payload into a call's real result.
type ResumeHandler func(f *Frame, input json.RawMessage, r instance.Resolution) (any, error)

// Tool is a type-erased tool, transition or pack tool.
type Tool struct {
	Spec       llm.ToolSpec
	Transition bool
	Concurrent bool
	Terminal   bool
	// Timeout bounds each call of the tool (zero: the executor's default).
	Timeout time.Duration
	Run     Handler
	// Resume, when set, receives resume payloads (node.OnResume).
	Resume ResumeHandler
	// InType is the tool's input type, to check resume handlers against.
	InType reflect.Type
	// Payload is the schema of the resume payloads the tool accepts
	// (node.ResumeWith); nil accepts any payload. PayloadType is the Go
	// type it was inferred from, to check a typed resume handler against.
	Payload     *Schema
	PayloadType reflect.Type
	// Err is a construction error, reported when the node is built.
	Err error
}

// Schema is a compiled JSON Schema for an input type.
type Schema struct {
	Raw      json.RawMessage
	resolved *jsonschema.Resolved
	// accept, when the schema allows, accepts valid values without the
	// resolved schema's allocations.
	accept *acceptor
}

// SchemaFor infers and compiles the JSON Schema of In, which must describe
// a JSON object.
func SchemaFor[In any]() (*Schema, error) {
	s, err := infer[In]()
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("input type %s must be a struct or map, not %q", reflect.TypeFor[In](), s.Type)
	}
	return compile(s)
}

// PayloadSchemaFor infers and compiles the JSON Schema of P, the resume
// payload type a tool or command declares; any JSON type goes.
func PayloadSchemaFor[P any]() (*Schema, error) {
	s, err := infer[P]()
	if err != nil {
		return nil, err
	}
	return compile(s)
}

func infer[T any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, fmt.Errorf("schema for %s: %w", reflect.TypeFor[T](), err)
	}
	return s, nil
}

// ParseSchema compiles a JSON Schema kept as JSON (a suspension's payload
// schema).
func ParseSchema(raw json.RawMessage) (*Schema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return compile(&s)
}

func compile(s *jsonschema.Schema) (*Schema, error) {
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &Schema{Raw: raw, resolved: r, accept: newAcceptor(s)}, nil
}

// Decode validates data against the schema and decodes it into In. An empty
// input is an empty object. Failures wrap instance.ErrInvalidInput.
func Decode[In any](s *Schema, data json.RawMessage) (In, error) {
	var in In
	return in, s.DecodeInto(data, &in)
}

// DecodeInto validates data against the schema and decodes it into the
// value v points to. Failures wrap instance.ErrInvalidInput. Input the
// schema's acceptor takes as it is (the usual case) is decoded once;
// anything else is decoded into an any first, for the full validator.
func (s *Schema) DecodeInto(data json.RawMessage, v any) error {
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if s.accept != nil && s.accept.acceptsRaw(data) {
		// Certainly valid: decode once, straight into v.
		if err := unmarshal(data, v); err != nil {
			return fmt.Errorf("%w: %v", instance.ErrInvalidInput, err)
		}
		return nil
	}
	if err := s.CheckInput(data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", instance.ErrInvalidInput, err)
	}
	return nil
}

// CheckInput checks an input against the schema: a refusal is an
// *instance.InputError that says where and what, for a person.
func (s *Schema) CheckInput(data json.RawMessage) error {
	if err := s.Validate(data); err != nil {
		field, reason := s.explain(data, err)
		return &instance.InputError{Field: field, Violation: reason}
	}
	return nil
}

// Validate checks that data is JSON the schema accepts; the error says
// what is wrong.
func (s *Schema) Validate(data json.RawMessage) error {
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		return err
	}
	if s.accept != nil && s.accept.accepts(generic) {
		return nil
	}
	return s.resolved.Validate(generic)
}

// CheckPayload checks a resume payload of call against the call's payload
// schema. Calls without a schema and error payloads accept anything; a
// missing payload, or one the schema rejects, is an *instance.PayloadError.
func CheckPayload(call *instance.SuspendedCall, payload json.RawMessage, isError bool) error {
	if len(call.PayloadSchema) == 0 || isError {
		return nil
	}
	reject := func(field, violation string) error {
		return &instance.PayloadError{SuspendID: call.SuspendID, Field: field, Violation: violation}
	}
	s, err := ParseSchema(call.PayloadSchema)
	if err != nil {
		return reject("", "the suspension's payload schema is unusable: "+err.Error())
	}
	if len(payload) == 0 {
		return reject("", "missing")
	}
	if err := s.Validate(payload); err != nil {
		return reject(s.explain(payload, err))
	}
	return nil
}

// explain says where data, which the schema refused with err, breaks it:
// the field and a short reason, or (no field) err's text when explain
// cannot tell.
func (s *Schema) explain(data json.RawMessage, err error) (field, reason string) {
	var v any
	if json.Unmarshal(data, &v) == nil {
		if f, r, ok := explain(s.resolved.Schema(), v, ""); ok {
			return f, r
		}
	}
	return "", err.Error()
}

// Bind builds a Handler from a typed function: decode and validate the
// input, build the typed context, call fn, and enforce that a suspension
// comes with the zero result.
func Bind[C, In, Out any](s *Schema, mk func(*Frame) C, fn func(C, In) (Out, error)) Handler {
	return func(f *Frame, data json.RawMessage) (any, error) {
		in, err := Decode[In](s, data)
		if err != nil {
			return nil, err
		}
		out, err := fn(mk(f), in)
		return Result(out, err)
	}
}

// Result checks a handler's return: a suspension must come with the zero
// result.
func Result[Out any](out Out, err error) (any, error) {
	if _, ok := errors.AsType[*instance.SuspendRequest](err); ok && !isZero(out) {
		return nil, instance.ErrSuspendWithResult
	}
	return out, err
}

// isZero reports whether v is its type's zero value. It takes a copy, so
// only calls to it move a value to the heap.
func isZero[T any](v T) bool { return reflect.ValueOf(&v).Elem().IsZero() }

// Suspend builds the suspension a handler returns.
func Suspend(reason string, opts []instance.SuspendOption) error {
	return instance.NewSuspendRequest(reason, opts...)
}

// Call runs h, turning a panic into an error.
func Call(h Handler, f *Frame, input json.RawMessage) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: %v", instance.ErrPanic, r)
		}
	}()
	return h(f, input)
}

// CallResume runs a resume handler, turning a panic into an error.
func CallResume(h ResumeHandler, f *Frame, input json.RawMessage, r instance.Resolution) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("%w: %v", instance.ErrPanic, p)
		}
	}()
	return h(f, input, r)
}

// Command is a type-erased command, as a node or pack holds it.
type Command struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the command's input.
	InputSchema json.RawMessage
	// Payload is the schema of the resume payloads the command accepts
	// (command.ResumeWith); nil accepts any payload.
	Payload *Schema
	Run     Handler
	// Err is a construction error, reported when the node is built.
	Err error
}

// NewCall builds the record of a suspension requested by sr, made at now:
// a fresh ID from newID unless sr names one, and sr's timeout turned into
// a deadline.
func NewCall(sr *instance.SuspendRequest, now time.Time, newID func() string, instanceID string, kind instance.CallKind, by instance.Initiator, name string, input json.RawMessage) instance.SuspendedCall {
	now = now.UTC()
	c := instance.SuspendedCall{
		SuspendID:   sr.ID,
		InstanceID:  instanceID,
		Kind:        kind,
		Initiator:   by,
		Name:        name,
		Input:       append(json.RawMessage(nil), input...),
		Metadata:    sr.Metadata,
		Reason:      sr.Reason,
		SuspendedAt: now,
		Deadline:    sr.Deadline,
		OnTimeout:   sr.OnTimeout,
		Event:       sr.Event,
		Status:      instance.StatusPending,
		Policy:      sr.Policy,
	}
	if c.SuspendID == "" {
		c.SuspendID = newID()
	}
	if c.Deadline.IsZero() && sr.Timeout > 0 {
		c.Deadline = now.Add(sr.Timeout)
	}
	return c
}

// PayloadText is the tool-result text of a stored payload: a JSON string is
// the text itself, anything else its JSON.
func PayloadText(raw json.RawMessage) string {
	return instance.Resolution{Payload: raw}.Text()
}
