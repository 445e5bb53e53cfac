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
		e.b = appendArrayLen(e.b, len(history))
		for i := range history {
			e.b = appendMessage(e.b, &history[i])
		}
	}
	return nil
}

// encState is one state ready to write: msgpack or JSON bytes.
type encState struct {
	name string
	mp   []byte
	json []byte
}

func (e *encoder) state(t reflect.Type, name string, v any) (encState, error) {
	s := encState{name: name}
	var err error
	if codecFor(t).asJSON {
		s.json, err = encodeJSON(v)
		if err != nil {
			err = fmt.Errorf("%w: state of type %T: %w", ErrEncode, v, err)
		}
	} else {
		s.mp, err = appendState(nil, v)
	}
	return s, err
}

func (e *encoder) instance(in *instance.Instance, depth int) error {
	if in == nil {
		return fmt.Errorf("%w: nil instance", ErrEncode)
	}
	if depth > MaxDepth {
		return fmt.Errorf("%w: %w: instance tree deeper than %d", ErrEncode, ErrLimit, MaxDepth)
	}
	st, err := e.state(e.stateType(in.Node, in.State), "", in.State)
	if err != nil {
		return fmt.Errorf("instance %s: %w", in.ID, err)
	}
	var packs, packsJSON []encState
	if len(in.Packs) > 0 {
		names := make([]string, 0, len(in.Packs))
		for name := range in.Packs {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			v := in.Packs[name]
			ps, err := e.state(e.packType(name, v), name, v)
			if err != nil {
				return fmt.Errorf("pack %s: %w", name, err)
			}
			if ps.json != nil {
				packsJSON = append(packsJSON, ps)
			} else {
				packs = append(packs, ps)
			}
		}
	}
	n := 3 // i, n, s or sj
	n += count(len(in.Children) > 0, len(packs) > 0, len(packsJSON) > 0, in.Suspension != nil, in.Idle, in.MaxTokensStreak != 0)
	e.b = appendMapLen(e.b, n)
	e.b = appendKey(e.b, "i")
	e.b = appendStr(e.b, in.ID)
	e.b = appendKey(e.b, "n")
	e.b = appendStr(e.b, in.Node)
	if st.json != nil {
		e.b = appendKey(e.b, "sj")
		e.b = appendBin(e.b, st.json)
	} else {
		e.b = appendKey(e.b, "s")
		e.b = append(e.b, st.mp...)
	}
	if len(in.Children) > 0 {
		e.b = appendKey(e.b, "c")
		e.b = appendArrayLen(e.b, len(in.Children))
		for _, ch := range in.Children {
			if err := e.instance(ch, depth+1); err != nil {
				return err
			}
		}
	}
	if len(packs) > 0 {
		e.b = appendKey(e.b, "p")
		e.b = appendMapLen(e.b, len(packs))
		for _, p := range packs {
			e.b = appendStr(e.b, p.name)
			e.b = append(e.b, p.mp...)
		}
	}
	if len(packsJSON) > 0 {
		e.b = appendKey(e.b, "pj")
		e.b = appendMapLen(e.b, len(packsJSON))
		for _, p := range packsJSON {
			e.b = appendStr(e.b, p.name)
			e.b = appendBin(e.b, p.json)
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
	if in.MaxTokensStreak != 0 {
		e.b = appendKey(e.b, "m")
		e.b = appendInt(e.b, int64(in.MaxTokensStreak))
	}
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
			e.b = appendCall(e.b, &s.Calls[i])
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

func appendCall(b []byte, c *instance.SuspendedCall) []byte {
	n := 1 + count(c.InstanceID != "", c.ToolUseID != "", c.Kind != "", c.Initiator != "", c.Name != "",
		len(c.Input) > 0, len(c.Metadata) > 0, c.Reason != "", !c.SuspendedAt.IsZero(), !c.Deadline.IsZero(),
		!timeoutZero(&c.OnTimeout), c.Status != "", c.Stage != 0)
	b = appendMapLen(b, n)
	b = appendKey(b, "i")
	b = appendStr(b, c.SuspendID)
	b = optStr(b, "n", c.InstanceID)
	b = optStr(b, "u", c.ToolUseID)
	b = optStr(b, "k", string(c.Kind))
	b = optStr(b, "b", string(c.Initiator))
	b = optStr(b, "a", c.Name)
	b = optBin(b, "in", c.Input)
	b = optBin(b, "md", c.Metadata)
	b = optStr(b, "r", c.Reason)
	if !c.SuspendedAt.IsZero() {
		b = appendKey(b, "at")
		b = appendTime(b, c.SuspendedAt)
	}
	if !c.Deadline.IsZero() {
		b = appendKey(b, "dl")
		b = appendTime(b, c.Deadline)
	}
	if t := &c.OnTimeout; !timeoutZero(t) {
		b = appendKey(b, "ot")
		b = appendMapLen(b, count(t.Resume, len(t.Payload) > 0, t.IsError))
		b = optBool(b, "r", t.Resume)
		b = optBin(b, "p", t.Payload)
		b = optBool(b, "e", t.IsError)
	}
	b = optStr(b, "s", string(c.Status))
	if c.Stage != 0 {
		b = appendKey(b, "g")
		b = appendInt(b, int64(c.Stage))
	}
	return b
}

func optStr(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	return appendStr(appendKey(b, k), v)
}

func optBin(b []byte, k string, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return appendBin(appendKey(b, k), v)
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
		w, err := toWireEffect(r.Transition)
		if err != nil {
			return err
		}
		eff = &w
	}
	e.b = appendMapLen(e.b, 1+count(len(r.Results) > 0, eff != nil, r.Terminal))
	e.b = appendKey(e.b, "m")
	e.b = appendMessage(e.b, &r.Message)
	if len(r.Results) > 0 {
		e.b = appendKey(e.b, "r")
		e.b = appendArrayLen(e.b, len(r.Results))
		for i := range r.Results {
			e.b = appendPart(e.b, &r.Results[i])
		}
	}
	if eff != nil {
		e.b = appendKey(e.b, "t")
		e.b = appendEffect(e.b, eff)
	}
	if r.Terminal {
		e.b = appendKey(e.b, "x")
		e.b = appendBool(e.b, true)
	}
	return nil
}

// toWireEffect encodes a held transition: states and content as JSON.
func toWireEffect(eff *instance.Effect) (wireEffect, error) {
	w := wireEffect{Kind: uint8(eff.Kind), Target: eff.Target}
	var err error
	if eff.State != nil {
		if w.State, err = encodeJSON(eff.State); err != nil {
			return w, fmt.Errorf("%w: held transition state: %w", ErrEncode, err)
		}
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
			}
		}
	}
	return w, nil
}

func appendEffect(b []byte, w *wireEffect) []byte {
	b = appendMapLen(b, 1+count(w.Target != "", len(w.State) > 0, len(w.Children) > 0, len(w.Content) > 0))
	b = appendKey(b, "k")
	b = appendUint(b, uint64(w.Kind))
	b = optStr(b, "t", w.Target)
	b = optBin(b, "s", w.State)
	if len(w.Children) > 0 {
		b = appendKey(b, "c")
		b = appendArrayLen(b, len(w.Children))
		for _, c := range w.Children {
			b = appendMapLen(b, 1+count(c.ID != "", len(c.State) > 0))
			b = optStr(b, "i", c.ID)
			b = appendKey(b, "n")
			b = appendStr(b, c.Node)
			b = optBin(b, "s", c.State)
		}
	}
	return optBin(b, "x", w.Content)
}

func sourceZero(s *message.Source) bool {
	return s.InstanceID == "" && s.Node == "" && s.To == ""
}

func appendMessage(b []byte, m *message.Message) []byte {
	b = appendMapLen(b, 1+count(len(m.Parts) > 0, !sourceZero(&m.Source), m.Silent))
	b = appendKey(b, "r")
	b = appendStr(b, string(m.Role))
	if len(m.Parts) > 0 {
		b = appendKey(b, "p")
		b = appendArrayLen(b, len(m.Parts))
		for i := range m.Parts {
			b = appendPart(b, &m.Parts[i])
		}
	}
	if s := &m.Source; !sourceZero(s) {
		b = appendKey(b, "s")
		b = appendMapLen(b, count(s.InstanceID != "", s.Node != "", s.To != ""))
		b = optStr(b, "i", s.InstanceID)
		b = optStr(b, "n", s.Node)
		b = optStr(b, "t", s.To)
	}
	return optBool(b, "q", m.Silent)
}

func appendPart(b []byte, p *message.Part) []byte {
	b = appendMapLen(b, count(p.Kind != 0, p.Text != "", p.ID != "", p.Name != "", len(p.Data) > 0,
		p.IsError, p.Signature != "", p.SuspendID != ""))
	if p.Kind != 0 {
		b = appendKey(b, "k")
		b = appendUint(b, uint64(p.Kind))
	}
	b = optStr(b, "t", p.Text)
	b = optStr(b, "i", p.ID)
	b = optStr(b, "n", p.Name)
	b = optBin(b, "d", p.Data)
	b = optBool(b, "e", p.IsError)
	b = optStr(b, "g", p.Signature)
	return optStr(b, "u", p.SuspendID)
}

// jsonValid reports whether raw is valid JSON (the empty value counts).
func jsonValid(raw []byte) bool { return len(raw) == 0 || json.Valid(raw) }
