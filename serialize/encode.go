package serialize

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// The writing side of the wire codec: the encoder the generated writers
// (wire_gen.go, from wire.go) and conversions to the wire structs run on,
// and the hooks that fill the fields whose encoding depends on the
// charter (fillInstance, fillReply).

// machineModel is the in-memory form of wireMachine.
type machineModel struct {
	Root    *instance.Instance
	History []message.Message
}

// encoder writes one blob (or converts one machine to the wire structs).
// Errors are sticky: the first one is kept in err and returned at the end.
type encoder struct {
	c    *machine.Charter
	form stateForm
	b    []byte
	err  error
	// machine is the machine being written (held here, not on the stack,
	// for the writer encodeMachine calls).
	machine machineModel
	// depth is the depth of the instance being written (the root's is 1).
	depth int
	// scratch holds encoded states until they are written.
	scratch []byte
	// dict numbers the strings of intern fields written so far; maxLen is
	// the length of the longest.
	dict   map[string]int
	maxLen int
	// cache remembers recent dictionary hits: the same few IDs and names
	// repeat message after message.
	cache [32]struct {
		s string
		i int
	}
}

var encoderPool = sync.Pool{New: func() any { return &encoder{} }}

// The largest dictionary and state scratch a pooled encoder keeps.
const (
	maxPooledDict    = 4096
	maxPooledScratch = 1 << 20
)

// newEncoder returns an encoder of states in form f, writing after b.
func newWireEncoder(c *machine.Charter, f stateForm, b []byte) *encoder {
	e := encoderPool.Get().(*encoder)
	e.c, e.form, e.b = c, f, b
	return e
}

// release returns the encoder's output and error and puts it back in the
// pool.
func (e *encoder) release() ([]byte, error) {
	b, err := e.b, e.err
	dict, scratch := e.dict, e.scratch[:0]
	if len(dict) > maxPooledDict || cap(scratch) > maxPooledScratch {
		dict, scratch = nil, nil // a large machine's: let it go
	}
	clear(dict)
	*e = encoder{dict: dict, scratch: scratch}
	encoderPool.Put(e)
	return b, err
}

// fail records err unless an error is already recorded.
func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// enter goes one level down the instance tree, failing past MaxDepth.
func (e *encoder) enter(string) bool {
	if e.depth >= MaxDepth {
		e.fail(fmt.Errorf("%w: %w: instance tree deeper than %d", ErrEncode, ErrLimit, MaxDepth))
		return false
	}
	e.depth++
	return true
}

func (e *encoder) leave() { e.depth-- }

// Interning, as the msgpack library's intern option does it.
const (
	minInternLen = 3
	maxDictLen   = 1<<16 - 1
	internExt    = 0x80 // extension type -128
)

// str appends a string: a reference when an intern field wrote it before
// (as the msgpack library does for every string once its dictionary is
// not empty), else the string.
func (e *encoder) str(s string) {
	if !e.ref(s) {
		e.b = appendStr(e.b, s)
	}
}

// ref appends a reference to s and reports true if s is numbered.
func (e *encoder) ref(s string) bool {
	if len(s) < minInternLen || len(s) > e.maxLen {
		return false
	}
	c := &e.cache[(len(s)^int(s[len(s)-1])<<1^int(s[len(s)/2])<<2)&31]
	i := c.i
	if c.s != s {
		var ok bool
		if i, ok = e.dict[s]; !ok {
			return false
		}
		c.s, c.i = s, i
	}
	if i <= 0xff {
		e.b = append(e.b, mpFixExt1, internExt, byte(i))
	} else {
		e.b = append(e.b, mpFixExt2, internExt, byte(i>>8), byte(i))
	}
	return true
}

// istr appends s as an intern field: a reference when it was written
// before, else the string, numbered when long enough.
func (e *encoder) istr(s string) {
	if e.ref(s) {
		return
	}
	if len(s) >= minInternLen && len(e.dict) < maxDictLen {
		if e.dict == nil {
			e.dict = make(map[string]int, 64)
		}
		e.dict[s] = len(e.dict)
		e.maxLen = max(e.maxLen, len(s))
	}
	e.b = appendStr(e.b, s)
}

// The scalar writers of the generated code: x writes a value, optX a key
// and the value unless it is empty.

func (e *encoder) bool(v bool)       { e.b = appendBool(e.b, v) }
func (e *encoder) int(v int)         { e.b = appendInt(e.b, int64(v)) }
func (e *encoder) uint8(v uint8)     { e.b = appendUint(e.b, uint64(v)) }
func (e *encoder) bin(v []byte)      { e.b = appendBin(e.b, v) }
func (e *encoder) raw(v []byte)      { e.b = append(e.b, v...) }
func (e *encoder) time(v time.Time)  { e.b = appendTime(e.b, v) }
func (e *encoder) key(k string) bool { e.b = appendKey(e.b, k); return true }

func (e *encoder) optStr(k, v string) {
	if v != "" && e.key(k) {
		e.str(v)
	}
}

func (e *encoder) optIstr(k, v string) {
	if v != "" && e.key(k) {
		e.istr(v)
	}
}

func (e *encoder) optBool(k string, v bool) {
	if v && e.key(k) {
		e.bool(v)
	}
}

func (e *encoder) optInt(k string, v int) {
	if v != 0 && e.key(k) {
		e.int(v)
	}
}

func (e *encoder) optUint8(k string, v uint8) {
	if v != 0 && e.key(k) {
		e.uint8(v)
	}
}

func (e *encoder) optBin(k string, v []byte) {
	if len(v) > 0 && e.key(k) {
		e.bin(v)
	}
}

func (e *encoder) optRaw(k string, v []byte) {
	if len(v) > 0 && e.key(k) {
		e.raw(v)
	}
}

func (e *encoder) optTime(k string, v time.Time) {
	if !v.IsZero() && e.key(k) {
		e.time(v)
	}
}

// writePtr writes *v with write, or nil.
func writePtr[T any](e *encoder, v *T, write func(*T)) {
	if v == nil {
		e.b = append(e.b, mpNil)
		return
	}
	write(v)
}

// writeNonNil writes *v, a what, with write, failing when v is nil.
func writeNonNil[T any](e *encoder, what string, v *T, write func(*T)) {
	if v == nil {
		e.fail(fmt.Errorf("%w: nil %s", ErrEncode, what))
		return
	}
	write(v)
}

// toWireList converts the elements of s to the wire structs with conv.
func toWireList[M, W any](s []M, conv func(*M, *W)) []W {
	if len(s) == 0 {
		return nil
	}
	w := make([]W, len(s))
	for i := range s {
		conv(&s[i], &w[i])
	}
	return w
}

// toWirePtr converts *v, a what, to a new wire struct with conv, failing
// when v is nil.
func toWirePtr[M, W any](e *encoder, what string, v *M, conv func(*M, *W)) *W {
	if v == nil {
		e.fail(fmt.Errorf("%w: nil %s", ErrEncode, what))
		return nil
	}
	w := new(W)
	conv(v, w)
	return w
}

// writeMap writes a map with its keys sorted.
func writeMap[V any](e *encoder, m map[string]V, write func(V)) {
	var buf [8]string
	keys := sortedKeys(buf[:0], m)
	e.b = appendMapLen(e.b, len(keys))
	for _, k := range keys {
		e.str(k)
		write(m[k])
	}
}

// sortedKeys appends the keys of m to buf, sorted.
func sortedKeys[V any](buf []string, m map[string]V) []string {
	for k := range m {
		buf = append(buf, k)
	}
	slices.Sort(buf)
	return buf
}

// count returns the number of true conditions.
func count(conds ...bool) int {
	n := 0
	for _, c := range conds {
		if c {
			n++
		}
	}
	return n
}

// utc returns t in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// jsonOrBytes returns raw for a raw JSON field of the wire structs and,
// in the JSON form, raw for its bytes field instead when it is not valid
// JSON.
func (e *encoder) jsonOrBytes(raw []byte) (json.RawMessage, []byte) {
	if e.form.jsonForm() && !jsonValid(raw) {
		return nil, raw
	}
	return raw, nil
}

// rawJSON returns raw for the field key of a wire struct, failing in the
// JSON form when it is not valid JSON.
func (e *encoder) rawJSON(what, key string, raw []byte) json.RawMessage {
	if e.form.jsonForm() && !jsonValid(raw) {
		e.fail(fmt.Errorf("%w: %s field %q is not valid JSON", ErrEncode, what, key))
	}
	return raw
}

// jsonValid reports whether raw is valid JSON (the empty value counts).
func jsonValid(raw []byte) bool { return len(raw) == 0 || json.Valid(raw) }

// stateForm encodes states for one form: msgpack or JSON bytes.
type stateForm interface {
	encode(e *encoder, t reflect.Type, v any) (mp, js []byte, err error)
	// jsonForm reports whether raw JSON fields must be valid JSON.
	jsonForm() bool
}

// msgpackStates encodes states for the msgpack form: natively, or as JSON
// for types with JSON methods msgpack does not use.
type msgpackStates struct{}

func (msgpackStates) encode(e *encoder, t reflect.Type, v any) ([]byte, []byte, error) {
	if codecFor(t).asJSON {
		js, err := encodeJSON(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: state of type %T: %w", ErrEncode, v, err)
		}
		return nil, js, nil
	}
	start := len(e.scratch)
	var err error
	e.scratch, err = appendState(e.scratch, v)
	return e.scratch[start:len(e.scratch):len(e.scratch)], nil, err
}

func (msgpackStates) jsonForm() bool { return false }

// jsonStates encodes states as JSON.
type jsonStates struct{}

func (jsonStates) encode(_ *encoder, _ reflect.Type, v any) ([]byte, []byte, error) {
	js, err := encodeJSON(v)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: state of type %T: %w", ErrEncode, v, err)
	}
	return nil, js, nil
}

func (jsonStates) jsonForm() bool { return true }

// fillInstance fills the states of in, with their versions, into w.
func (e *encoder) fillInstance(in *instance.Instance, w *wireInstance) {
	var err error
	w.State, w.StateJSON, err = e.form.encode(e, e.stateType(in.Node, in.State), in.State)
	if err != nil {
		e.fail(fmt.Errorf("instance %s: %w", in.ID, err))
	}
	w.StateVersion = e.stateVersion(in.Node)
	if in.Reply != nil {
		e.fillInFlight(in.Reply, w)
	}
	for name, v := range in.Packs {
		mp, js, err := e.form.encode(e, e.packType(name, v), v)
		if err != nil {
			e.fail(fmt.Errorf("pack %s: %w", name, err))
		}
		if js != nil {
			w.PacksJSON = put(w.PacksJSON, name, json.RawMessage(js))
		} else {
			w.Packs = put(w.Packs, name, mp)
		}
		if v := e.packVersion(name); v != 0 {
			w.PackVersions = put(w.PackVersions, name, v)
		}
	}
}

// fillInFlight fills the reply in flight r into w: in the JSON form as
// JSON, in the msgpack form as a msgpack value with a dictionary of its
// own (see wireInFlight).
func (e *encoder) fillInFlight(r *instance.Reply, w *wireInstance) {
	if e.form.jsonForm() {
		var wr wireInFlight
		e.toWireInFlight(r, &wr)
		js, err := json.Marshal(&wr)
		if err != nil {
			e.fail(fmt.Errorf("%w: reply in flight: %w", ErrEncode, err))
		}
		w.ReplyJSON = js
		return
	}
	sub := newWireEncoder(e.c, e.form, nil)
	sub.writeInFlight(r)
	b, err := sub.release()
	if err != nil {
		e.fail(err)
	}
	w.Reply = b
}

// put sets m[k] to v, making m when it is nil.
func put[M ~map[string]V, V any](m M, k string, v V) M {
	if m == nil {
		m = M{}
	}
	m[k] = v
	return m
}

// stateType returns the type states of node name are encoded with: the
// node's state type, or the value's own type for a node the charter does
// not know.
func (e *encoder) stateType(node string, v any) reflect.Type {
	if n := e.c.Node(node); n != nil {
		return n.StateType()
	}
	return dynamicType(v)
}

// stateVersion returns the state version of node name (0 for a node the
// charter does not know).
func (e *encoder) stateVersion(node string) int {
	if n := e.c.Node(node); n != nil {
		return n.StateVersion()
	}
	return 0
}

// packVersion returns the state version of pack name (0 for a pack the
// charter does not know).
func (e *encoder) packVersion(name string) int {
	if p := e.c.Pack(name); p != nil {
		return p.StateVersion()
	}
	return 0
}

func (e *encoder) packType(name string, v any) reflect.Type {
	if p := e.c.Pack(name); p != nil {
		return p.StateType()
	}
	return dynamicType(v)
}

func dynamicType(v any) reflect.Type {
	if v == nil {
		return reflect.TypeFor[any]()
	}
	return reflect.TypeOf(v)
}

// fillReply fills the held transition of r into w.
func (e *encoder) fillReply(r *instance.HeldReply, w *wireReply) {
	if r.Transition != nil {
		w.Transition = e.toWireEffect(r.Transition)
	}
}

// toWireEffect encodes a held transition: states, with their node's state
// version, and content as JSON.
func (e *encoder) toWireEffect(eff *instance.Effect) *wireEffect {
	w := &wireEffect{Kind: uint8(eff.Kind), Target: eff.Target}
	if eff.State != nil {
		w.State = e.json("held transition state", eff.State)
		w.StateVersion = e.stateVersion(eff.Target)
	}
	if eff.Content != nil {
		w.Content = e.json("held cede content", eff.Content)
	}
	if len(eff.Children) > 0 {
		w.Children = make([]wireChild, len(eff.Children))
		for i, c := range eff.Children {
			w.Children[i] = wireChild{ID: c.ID, Node: c.Node}
			if c.State != nil {
				w.Children[i].State = e.json("held spawn state", c.State)
				w.Children[i].StateVersion = e.stateVersion(c.Node)
			}
		}
	}
	return w
}

// json returns v as JSON, failing with ErrEncode when it cannot be.
func (e *encoder) json(what string, v any) json.RawMessage {
	b, err := encodeJSON(v)
	if err != nil {
		e.fail(fmt.Errorf("%w: %s: %w", ErrEncode, what, err))
	}
	return b
}

// governance is the JSON of a call's policy and decisions (wireCall's
// Governance).
type governance struct {
	Policy      *instance.Policy    `json:"policy,omitempty"`
	Decisions   []instance.Decision `json:"decisions,omitempty"`
	InputSchema json.RawMessage     `json:"input_schema,omitempty"`
	RemindAt    time.Time           `json:"remind_at,omitzero"`
}

// fillCall fills the governance of c into w.
func (e *encoder) fillCall(c *instance.SuspendedCall, w *wireCall) {
	if c.Policy == nil && len(c.Decisions) == 0 {
		return
	}
	b, err := json.Marshal(governance{Policy: c.Policy, Decisions: c.Decisions, InputSchema: c.InputSchema, RemindAt: c.RemindAt})
	if err != nil {
		e.fail(fmt.Errorf("%w: call %s: governance: %w", ErrEncode, c.SuspendID, err))
		return
	}
	w.Governance = b
}
