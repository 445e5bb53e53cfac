package serialize

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// The msgpack form of the v1 wire model (wire.go), written straight from
// the in-memory types. Field order and omission follow the wire structs
// exactly: codec_test.go compares these bytes with what the msgpack
// library writes for the structs.

// encoder writes one blob.
type encoder struct {
	c *machine.Charter
	b []byte
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

// optStr appends key k and s unless s is empty.
func (e *encoder) optStr(k, s string) {
	if s != "" {
		e.b = appendKey(e.b, k)
		e.str(s)
	}
}

// optIstr appends key k and s as an intern field unless s is empty.
func (e *encoder) optIstr(k, s string) {
	if s != "" {
		e.b = appendKey(e.b, k)
		e.istr(s)
	}
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

func (e *encoder) machine(root *instance.Instance, history []message.Message) error {
	n := 1
	if len(history) > 0 {
		n++
	}
	e.b = appendMapLen(e.b, n)
	e.b = appendKey(e.b, "r")
	if err := e.instance(root, 1); err != nil {
		return err
	}
	if len(history) > 0 {
		e.b = appendKey(e.b, "h")
		e.messages(history)
	}
	return nil
}

// messages appends an array of messages.
func (e *encoder) messages(msgs []message.Message) {
	e.b = appendArrayLen(e.b, len(msgs))
	for i := range msgs {
		e.message(&msgs[i])
	}
}

// state appends a state value: natively, or as JSON bytes when asJSON.
func (e *encoder) state(v any, asJSON bool) error {
	if !asJSON {
		var err error
		e.b, err = appendState(e.b, v)
		return err
	}
	js, err := encodeJSON(v)
	if err != nil {
		return fmt.Errorf("%w: state of type %T: %w", ErrEncode, v, err)
	}
	e.b = appendBin(e.b, js)
	return nil
}

func (e *encoder) instance(in *instance.Instance, depth int) error {
	if in == nil {
		return fmt.Errorf("%w: nil instance", ErrEncode)
	}
	if depth > MaxDepth {
		return fmt.Errorf("%w: %w: instance tree deeper than %d", ErrEncode, ErrLimit, MaxDepth)
	}
	stateJSON := codecFor(e.stateType(in.Node, in.State)).asJSON
	var packs, packsJSON, versioned []string
	if len(in.Packs) > 0 {
		for name, v := range in.Packs {
			if codecFor(e.packType(name, v)).asJSON {
				packsJSON = append(packsJSON, name)
			} else {
				packs = append(packs, name)
			}
			if e.packVersion(name) != 0 {
				versioned = append(versioned, name)
			}
		}
		slices.Sort(packs)
		slices.Sort(packsJSON)
		slices.Sort(versioned)
	}
	version := e.stateVersion(in.Node)
	n := 3 // i, n, s or sj
	n += count(version != 0, len(in.Children) > 0, len(packs) > 0, len(packsJSON) > 0, len(versioned) > 0,
		in.Suspension != nil, in.Idle, in.MaxTokensStreak != 0)
	e.b = appendMapLen(e.b, n)
	e.b = appendKey(e.b, "i")
	e.istr(in.ID)
	e.b = appendKey(e.b, "n")
	e.istr(in.Node)
	if stateJSON {
		e.b = appendKey(e.b, "sj")
	} else {
		e.b = appendKey(e.b, "s")
	}
	if err := e.state(in.State, stateJSON); err != nil {
		return fmt.Errorf("instance %s: %w", in.ID, err)
	}
	e.b = optInt(e.b, "sv", version)
	if len(in.Children) > 0 {
		e.b = appendKey(e.b, "c")
		e.b = appendArrayLen(e.b, len(in.Children))
		for _, ch := range in.Children {
			if err := e.instance(ch, depth+1); err != nil {
				return err
			}
		}
	}
	for _, set := range []struct {
		key   string
		names []string
	}{{"p", packs}, {"pj", packsJSON}} {
		if len(set.names) == 0 {
			continue
		}
		e.b = appendKey(e.b, set.key)
		e.b = appendMapLen(e.b, len(set.names))
		for _, name := range set.names {
			e.str(name)
			if err := e.state(in.Packs[name], set.key == "pj"); err != nil {
				return fmt.Errorf("pack %s: %w", name, err)
			}
		}
	}
	if len(versioned) > 0 {
		e.b = appendKey(e.b, "pv")
		e.b = appendMapLen(e.b, len(versioned))
		for _, name := range versioned {
			e.str(name)
			e.b = appendInt(e.b, int64(e.packVersion(name)))
		}
	}
	if in.Suspension != nil {
		e.b = appendKey(e.b, "u")
		if err := e.suspension(in.Suspension); err != nil {
			return fmt.Errorf("instance %s: %w", in.ID, err)
		}
	}
	if in.Idle {
		e.b = appendKey(e.b, "d")
		e.b = appendBool(e.b, true)
	}
	e.b = optInt(e.b, "m", in.MaxTokensStreak)
	return nil
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

func (e *encoder) suspension(s *instance.SuspensionState) error {
	e.b = appendMapLen(e.b, count(len(s.Calls) > 0, s.Reply != nil))
	if len(s.Calls) > 0 {
		e.b = appendKey(e.b, "c")
		e.b = appendArrayLen(e.b, len(s.Calls))
		for i := range s.Calls {
			e.call(&s.Calls[i])
		}
	}
	if s.Reply != nil {
		e.b = appendKey(e.b, "r")
		return e.reply(s.Reply)
	}
	return nil
}

func timeoutZero(t *instance.TimeoutAction) bool {
	return !t.Resume && len(t.Payload) == 0 && !t.IsError
}

func (e *encoder) call(c *instance.SuspendedCall) {
	n := 1 + count(c.InstanceID != "", c.ToolUseID != "", c.Kind != "", c.Initiator != "", c.Name != "",
		len(c.Input) > 0, len(c.Metadata) > 0, c.Reason != "", !c.SuspendedAt.IsZero(), !c.Deadline.IsZero(),
		!timeoutZero(&c.OnTimeout), c.Status != "", c.Stage != 0, len(c.PayloadSchema) > 0)
	e.b = appendMapLen(e.b, n)
	e.b = appendKey(e.b, "i")
	e.istr(c.SuspendID)
	e.optIstr("n", c.InstanceID)
	e.optIstr("u", c.ToolUseID)
	e.optIstr("k", string(c.Kind))
	e.optIstr("b", string(c.Initiator))
	e.optIstr("a", c.Name)
	e.b = optBin(e.b, "in", c.Input)
	e.b = optBin(e.b, "md", c.Metadata)
	e.optStr("r", c.Reason)
	if !c.SuspendedAt.IsZero() {
		e.b = appendTime(appendKey(e.b, "at"), c.SuspendedAt)
	}
	if !c.Deadline.IsZero() {
		e.b = appendTime(appendKey(e.b, "dl"), c.Deadline)
	}
	if t := &c.OnTimeout; !timeoutZero(t) {
		e.b = appendKey(e.b, "ot")
		e.b = appendMapLen(e.b, count(t.Resume, len(t.Payload) > 0, t.IsError))
		e.b = optBool(e.b, "r", t.Resume)
		e.b = optBin(e.b, "p", t.Payload)
		e.b = optBool(e.b, "e", t.IsError)
	}
	e.optIstr("s", string(c.Status))
	e.b = optInt(e.b, "g", c.Stage)
	e.b = optBin(e.b, "ps", c.PayloadSchema)
}

func optBin(b []byte, k string, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return appendBin(appendKey(b, k), v)
}

func optInt(b []byte, k string, v int) []byte {
	if v == 0 {
		return b
	}
	return appendInt(appendKey(b, k), int64(v))
}

func optBool(b []byte, k string, v bool) []byte {
	if !v {
		return b
	}
	return appendBool(appendKey(b, k), true)
}

func (e *encoder) reply(r *instance.HeldReply) error {
	var eff *wireEffect
	if r.Transition != nil {
		w, err := e.toWireEffect(r.Transition)
		if err != nil {
			return err
		}
		eff = &w
	}
	e.b = appendMapLen(e.b, 1+count(len(r.Results) > 0, eff != nil, r.Terminal, len(r.Deferred) > 0))
	e.b = appendKey(e.b, "m")
	e.message(&r.Message)
	if len(r.Results) > 0 {
		e.b = appendKey(e.b, "r")
		e.b = appendArrayLen(e.b, len(r.Results))
		for i := range r.Results {
			e.part(&r.Results[i])
		}
	}
	if eff != nil {
		e.b = appendKey(e.b, "t")
		e.effect(eff)
	}
	if r.Terminal {
		e.b = appendKey(e.b, "x")
		e.b = appendBool(e.b, true)
	}
	if len(r.Deferred) > 0 {
		e.b = appendKey(e.b, "d")
		e.messages(r.Deferred)
	}
	return nil
}

// toWireEffect encodes a held transition: states, with their node's state
// version, and content as JSON.
func (e *encoder) toWireEffect(eff *instance.Effect) (wireEffect, error) {
	w := wireEffect{Kind: uint8(eff.Kind), Target: eff.Target}
	var err error
	if eff.State != nil {
		if w.State, err = encodeJSON(eff.State); err != nil {
			return w, fmt.Errorf("%w: held transition state: %w", ErrEncode, err)
		}
		w.StateVersion = e.stateVersion(eff.Target)
	}
	if eff.Content != nil {
		if w.Content, err = encodeJSON(eff.Content); err != nil {
			return w, fmt.Errorf("%w: held cede content: %w", ErrEncode, err)
		}
	}
	if len(eff.Children) > 0 {
		w.Children = make([]wireChild, len(eff.Children))
		for i, c := range eff.Children {
			w.Children[i] = wireChild{ID: c.ID, Node: c.Node}
			if c.State != nil {
				if w.Children[i].State, err = encodeJSON(c.State); err != nil {
					return w, fmt.Errorf("%w: held spawn state: %w", ErrEncode, err)
				}
				w.Children[i].StateVersion = e.stateVersion(c.Node)
			}
		}
	}
	return w, nil
}

func (e *encoder) effect(w *wireEffect) {
	e.b = appendMapLen(e.b, 1+count(w.Target != "", len(w.State) > 0, w.StateVersion != 0, len(w.Children) > 0, len(w.Content) > 0))
	e.b = appendKey(e.b, "k")
	e.b = appendUint(e.b, uint64(w.Kind))
	e.optIstr("t", w.Target)
	e.b = optBin(e.b, "s", w.State)
	e.b = optInt(e.b, "sv", w.StateVersion)
	if len(w.Children) > 0 {
		e.b = appendKey(e.b, "c")
		e.b = appendArrayLen(e.b, len(w.Children))
		for _, c := range w.Children {
			e.b = appendMapLen(e.b, 1+count(c.ID != "", len(c.State) > 0, c.StateVersion != 0))
			e.optIstr("i", c.ID)
			e.b = appendKey(e.b, "n")
			e.istr(c.Node)
			e.b = optBin(e.b, "s", c.State)
			e.b = optInt(e.b, "sv", c.StateVersion)
		}
	}
	e.b = optBin(e.b, "x", w.Content)
}

func sourceZero(s *message.Source) bool {
	return s.InstanceID == "" && s.Node == "" && s.To == ""
}

func (e *encoder) message(m *message.Message) {
	e.b = appendMapLen(e.b, 1+count(len(m.Parts) > 0, !sourceZero(&m.Source), m.Silent))
	e.b = appendKey(e.b, "r")
	e.istr(string(m.Role))
	if len(m.Parts) > 0 {
		e.b = appendKey(e.b, "p")
		e.b = appendArrayLen(e.b, len(m.Parts))
		for i := range m.Parts {
			e.part(&m.Parts[i])
		}
	}
	if s := &m.Source; !sourceZero(s) {
		e.b = appendKey(e.b, "s")
		e.b = appendMapLen(e.b, count(s.InstanceID != "", s.Node != "", s.To != ""))
		e.optIstr("i", s.InstanceID)
		e.optIstr("n", s.Node)
		e.optIstr("t", s.To)
	}
	e.b = optBool(e.b, "q", m.Silent)
}

func (e *encoder) part(p *message.Part) {
	e.b = appendMapLen(e.b, count(p.Kind != 0, p.Text != "", p.ID != "", p.Name != "", len(p.Data) > 0,
		p.IsError, p.Signature != "", p.SuspendID != ""))
	if p.Kind != 0 {
		e.b = appendKey(e.b, "k")
		e.b = appendUint(e.b, uint64(p.Kind))
	}
	e.optStr("t", p.Text)
	e.optIstr("i", p.ID)
	e.optIstr("n", p.Name)
	e.b = optBin(e.b, "d", p.Data)
	e.b = optBool(e.b, "e", p.IsError)
	e.optStr("g", p.Signature)
	e.optIstr("u", p.SuspendID)
}

// jsonValid reports whether raw is valid JSON (the empty value counts).
func jsonValid(raw []byte) bool { return len(raw) == 0 || json.Valid(raw) }
