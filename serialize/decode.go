package serialize

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// The reader of the msgpack form of the v1 wire model. Map keys may come
// in any order; unknown keys are skipped, so a later writer may add keys
// without a new version as long as old readers can ignore them (and they
// do not intern strings: see wire.go).

// v1 decodes bodies of format version 1.
type v1 struct{}

func (v1) machine(c *machine.Charter, body []byte) (*instance.Instance, []message.Message, error) {
	d := decoder{c: c, r: newReader(body), slabs: &slabs{}}
	var root *instance.Instance
	var history []message.Message
	err := d.fields("machine", func(k []byte) error {
		var err error
		switch string(k) {
		case "r":
			root, err = d.instance(1)
		case "h":
			history, err = d.messages("history")
		default:
			err = d.r.skip()
		}
		return err
	})
	if err == nil {
		err = d.end()
	}
	if err == nil && root == nil {
		err = fmt.Errorf("%w: machine without a root instance", ErrCorrupt)
	}
	return root, history, err
}

func (v1) tree(c *machine.Charter, body []byte) (*instance.Instance, error) {
	d := decoder{c: c, r: newReader(body), slabs: &slabs{}}
	root, err := d.instance(1)
	if err == nil {
		err = d.end()
	}
	return root, err
}

func (v1) message(body []byte, s *slabs) (message.Message, error) {
	d := decoder{r: newReader(body), slabs: s}
	var m message.Message
	err := d.message(&m)
	if err == nil {
		err = d.end()
	}
	return m, err
}

// decoder reads one body.
type decoder struct {
	c *machine.Charter
	r *reader
	*slabs
}

// slabs hand out the parts and raw bytes of many messages from a few
// allocations; every slice handed out is capped, so appending to one never
// reaches another. With exact set (one message alone) they allocate what
// is asked.
type slabs struct {
	parts []message.Part
	bins  []byte
	exact bool
}

// newParts returns n zero parts.
func (s *slabs) newParts(n int) []message.Part {
	if n > len(s.parts) {
		if s.exact || n > 64 {
			return make([]message.Part, n)
		}
		s.parts = make([]message.Part, 256)
	}
	p := s.parts[:n:n]
	s.parts = s.parts[n:]
	return p
}

// newBytes returns n bytes.
func (s *slabs) newBytes(n int) []byte {
	if n > len(s.bins) {
		if s.exact || n > 1024 {
			return make([]byte, n)
		}
		s.bins = make([]byte, 8192)
	}
	p := s.bins[:n:n]
	s.bins = s.bins[n:]
	return p
}

// bin reads raw bytes (nil when empty).
func (d *decoder) bin() ([]byte, error) {
	n, err := d.r.bytesLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	p := d.newBytes(n)
	d.r.off += copy(p, d.r.b[d.r.off:])
	return p, nil
}

// end checks that the body holds nothing more.
func (d *decoder) end() error {
	if d.r.left() != 0 {
		return d.r.errAt("%d trailing bytes", d.r.left())
	}
	return nil
}

// fields reads a map, calling fn with each key; fn reads the value.
func (d *decoder) fields(what string, fn func(k []byte) error) error {
	n, err := d.r.mapLen()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for range n {
		k, err := d.r.key()
		if err != nil {
			return fmt.Errorf("%s key: %w", what, err)
		}
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}

// array reads an array header, checked against the bytes left, and calls
// fn with the length; fn reads the elements.
func (d *decoder) array(what string, fn func(n int) error) error {
	n, err := d.r.arrayLen()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fn(n)
}

// messages decodes an array of messages: the history, or the input
// deferred behind a held reply.
func (d *decoder) messages(what string) ([]message.Message, error) {
	var h []message.Message
	err := d.array(what, func(n int) error {
		if n == 0 {
			return nil
		}
		h = make([]message.Message, n)
		for i := range h {
			if err := d.message(&h[i]); err != nil {
				return fmt.Errorf("%s message %d: %w", what, i, err)
			}
		}
		return nil
	})
	return h, err
}

func (d *decoder) message(m *message.Message) error {
	return d.fields("message", func(k []byte) error {
		var err error
		switch string(k) {
		case "r":
			var s string
			s, err = d.r.istring()
			m.Role = message.Role(s)
		case "p":
			m.Parts, err = d.parts()
		case "s":
			err = d.fields("source", func(k []byte) error {
				var err error
				switch string(k) {
				case "i":
					m.Source.InstanceID, err = d.r.istring()
				case "n":
					m.Source.Node, err = d.r.istring()
				case "t":
					m.Source.To, err = d.r.istring()
				default:
					err = d.r.skip()
				}
				return err
			})
		case "q":
			m.Silent, err = d.r.bool()
		default:
			err = d.r.skip()
		}
		return err
	})
}

func (d *decoder) parts() ([]message.Part, error) {
	var ps []message.Part
	err := d.array("parts", func(n int) error {
		if n == 0 {
			return nil
		}
		ps = d.newParts(n)
		for i := range ps {
			if err := d.part(&ps[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return ps, err
}

func (d *decoder) part(p *message.Part) error {
	return d.fields("part", func(k []byte) error {
		var err error
		switch string(k) {
		case "k":
			var v int64
			v, err = d.r.intRange(0, 255)
			p.Kind = message.Kind(v)
		case "t":
			p.Text, err = d.r.string()
		case "i":
			p.ID, err = d.r.istring()
		case "n":
			p.Name, err = d.r.istring()
		case "d":
			p.Data, err = d.bin()
		case "e":
			p.IsError, err = d.r.bool()
		case "g":
			p.Signature, err = d.r.string()
		case "u":
			p.SuspendID, err = d.r.istring()
		default:
			err = d.r.skip()
		}
		return err
	})
}

// instance reads an instance and its subtree, depth levels down.
func (d *decoder) instance(depth int) (*instance.Instance, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: at byte %d: %w: instance tree deeper than %d", ErrCorrupt, d.r.off, ErrLimit, MaxDepth)
	}
	if d.r.nilNext() {
		return nil, d.r.errAt("nil instance")
	}
	in := &instance.Instance{}
	var state, stateJSON []byte
	var version int
	var packs, packsJSON []rawPack
	var packVersions map[string]int
	inChild := false // an error from a child names its own instance
	err := d.fields("instance", func(k []byte) error {
		var err error
		switch string(k) {
		case "i":
			in.ID, err = d.r.istring()
		case "n":
			in.Node, err = d.r.istring()
		case "s":
			state, err = d.r.value(maxStateDepth)
		case "sj":
			stateJSON, err = d.r.bin()
		case "sv":
			version, err = d.version()
		case "c":
			err = d.array("children", func(n int) error {
				if n == 0 {
					return nil
				}
				in.Children = make([]*instance.Instance, n)
				for i := range in.Children {
					ch, err := d.instance(depth + 1)
					if err != nil {
						inChild = true
						return err
					}
					in.Children[i] = ch
				}
				return nil
			})
		case "p":
			packs, err = d.packs(true)
		case "pj":
			packsJSON, err = d.packs(false)
		case "pv":
			packVersions = map[string]int{}
			err = d.fields("pack versions", func(k []byte) error {
				v, err := d.version()
				packVersions[string(k)] = v
				return err
			})
		case "u":
			in.Suspension, err = d.suspension()
		case "d":
			in.Idle, err = d.r.bool()
		case "m":
			var v int64
			v, err = d.r.intRange(-1<<31, 1<<31-1)
			in.MaxTokensStreak = int(v)
		default:
			err = d.r.skip()
		}
		return err
	})
	if err != nil {
		if in.ID != "" && !inChild {
			return nil, fmt.Errorf("instance %s: %w", in.ID, err)
		}
		return nil, err
	}
	n := d.c.Node(in.Node)
	if n == nil {
		return nil, fmt.Errorf("%w: instance %s: %w: %q", machine.ErrInvalidTree, in.ID, executor.ErrUnknownNode, in.Node)
	}
	in.State, err = evolvedState(n, version, state, stateJSON)
	if err != nil {
		return nil, fmt.Errorf("%w: instance %s: state of node %s: %w", machine.ErrInvalidTree, in.ID, in.Node, invalidState(err))
	}
	if len(packs)+len(packsJSON) > 0 {
		in.Packs = make(map[string]any, len(packs)+len(packsJSON))
		for _, set := range [][]rawPack{packs, packsJSON} {
			for _, rp := range set {
				p := d.c.Pack(rp.name)
				if p == nil {
					return nil, fmt.Errorf("%w: unknown pack %q", machine.ErrInvalidTree, rp.name)
				}
				var v any
				if rp.json {
					v, err = evolvedState(p, packVersions[rp.name], nil, rp.raw)
				} else {
					v, err = evolvedState(p, packVersions[rp.name], rp.raw, nil)
				}
				if err != nil {
					return nil, fmt.Errorf("%w: pack %s: %w", machine.ErrInvalidTree, rp.name, invalidState(err))
				}
				in.Packs[rp.name] = v
			}
		}
	}
	return in, nil
}

// invalidState returns err, a state's decoding error, wrapping
// instance.ErrInvalidState.
func invalidState(err error) error {
	if errors.Is(err, instance.ErrInvalidState) {
		return err
	}
	return fmt.Errorf("%w: %w", instance.ErrInvalidState, err)
}

// version reads a state version: a non-negative int.
func (d *decoder) version() (int, error) {
	v, err := d.r.intRange(0, 1<<31-1)
	return int(v), err
}

// decodeStateValue decodes a state of type t from its msgpack or JSON
// bytes; with neither, the state is the zero value of t.
func decodeStateValue(t reflect.Type, mp, js []byte) (any, error) {
	c := codecFor(t)
	switch {
	case len(js) > 0:
		return c.decodeJSON(js)
	case len(mp) > 0:
		return c.decode(mp)
	}
	return reflect.Zero(t).Interface(), nil
}

type rawPack struct {
	name string
	raw  []byte
	json bool
}

func (d *decoder) packs(mp bool) ([]rawPack, error) {
	var ps []rawPack
	err := d.fields("packs", func(k []byte) error {
		rp := rawPack{name: string(k), json: !mp}
		var err error
		if mp {
			rp.raw, err = d.r.value(maxStateDepth)
		} else {
			rp.raw, err = d.r.bin()
		}
		ps = append(ps, rp)
		return err
	})
	return ps, err
}

func (d *decoder) suspension() (*instance.SuspensionState, error) {
	s := &instance.SuspensionState{}
	err := d.fields("suspension", func(k []byte) error {
		var err error
		switch string(k) {
		case "c":
			err = d.array("calls", func(n int) error {
				if n == 0 {
					return nil
				}
				s.Calls = make([]instance.SuspendedCall, n)
				for i := range s.Calls {
					if err := d.call(&s.Calls[i]); err != nil {
						return err
					}
				}
				return nil
			})
		case "r":
			s.Reply, err = d.reply()
		default:
			err = d.r.skip()
		}
		return err
	})
	return s, err
}

func (d *decoder) call(c *instance.SuspendedCall) error {
	return d.fields("suspended call", func(k []byte) error {
		var err error
		var s string
		switch string(k) {
		case "i":
			c.SuspendID, err = d.r.istring()
		case "n":
			c.InstanceID, err = d.r.istring()
		case "u":
			c.ToolUseID, err = d.r.istring()
		case "k":
			s, err = d.r.istring()
			c.Kind = instance.CallKind(s)
		case "b":
			s, err = d.r.istring()
			c.Initiator = instance.Initiator(s)
		case "a":
			c.Name, err = d.r.istring()
		case "in":
			c.Input, err = d.bin()
		case "md":
			c.Metadata, err = d.bin()
		case "r":
			c.Reason, err = d.r.string()
		case "at":
			c.SuspendedAt, err = d.r.time()
		case "dl":
			c.Deadline, err = d.r.time()
		case "ot":
			t := &c.OnTimeout
			err = d.fields("on-timeout", func(k []byte) error {
				var err error
				switch string(k) {
				case "r":
					t.Resume, err = d.r.bool()
				case "p":
					t.Payload, err = d.bin()
				case "e":
					t.IsError, err = d.r.bool()
				default:
					err = d.r.skip()
				}
				return err
			})
		case "s":
			s, err = d.r.istring()
			c.Status = instance.Status(s)
		case "g":
			var v int64
			v, err = d.r.intRange(-1<<31, 1<<31-1)
			c.Stage = int(v)
		case "ps":
			c.PayloadSchema, err = d.bin()
		default:
			err = d.r.skip()
		}
		return err
	})
}

func (d *decoder) reply() (*instance.HeldReply, error) {
	r := &instance.HeldReply{}
	var eff *wireEffect
	err := d.fields("held reply", func(k []byte) error {
		var err error
		switch string(k) {
		case "m":
			err = d.message(&r.Message)
		case "r":
			r.Results, err = d.parts()
		case "t":
			eff = &wireEffect{}
			err = d.effect(eff)
		case "x":
			r.Terminal, err = d.r.bool()
		case "d":
			r.Deferred, err = d.messages("deferred input")
		default:
			err = d.r.skip()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if eff != nil {
		t, err := fromWireEffect(d.c, eff)
		if err != nil {
			return nil, err
		}
		r.Transition = t
	}
	return r, nil
}

func (d *decoder) effect(w *wireEffect) error {
	return d.fields("held transition", func(k []byte) error {
		var err error
		switch string(k) {
		case "k":
			var v int64
			v, err = d.r.intRange(0, 255)
			w.Kind = uint8(v)
		case "t":
			w.Target, err = d.r.istring()
		case "s":
			w.State, err = d.r.bin()
		case "sv":
			w.StateVersion, err = d.version()
		case "c":
			err = d.array("spawned children", func(n int) error {
				if n == 0 {
					return nil
				}
				w.Children = make([]wireChild, n)
				for i := range w.Children {
					c := &w.Children[i]
					err := d.fields("spawned child", func(k []byte) error {
						var err error
						switch string(k) {
						case "i":
							c.ID, err = d.r.istring()
						case "n":
							c.Node, err = d.r.istring()
						case "s":
							c.State, err = d.r.bin()
						case "sv":
							c.StateVersion, err = d.version()
						default:
							err = d.r.skip()
						}
						return err
					})
					if err != nil {
						return err
					}
				}
				return nil
			})
		case "x":
			w.Content, err = d.r.bin()
		default:
			err = d.r.skip()
		}
		return err
	})
}

// fromWireEffect decodes a held transition: states with their target
// node's type (validated), content as a string when it is a JSON string
// and as json.RawMessage otherwise.
func fromWireEffect(c *machine.Charter, w *wireEffect) (*instance.Effect, error) {
	eff := &instance.Effect{Kind: instance.EffectKind(w.Kind), Target: w.Target}
	var err error
	if len(w.State) > 0 {
		if eff.State, err = effectState(c, w.Target, w.StateVersion, w.State); err != nil {
			return nil, err
		}
	}
	if len(w.Children) > 0 {
		eff.Children = make([]instance.Child, len(w.Children))
		for i, ch := range w.Children {
			eff.Children[i] = instance.Child{ID: ch.ID, Node: ch.Node}
			if len(ch.State) > 0 {
				if eff.Children[i].State, err = effectState(c, ch.Node, ch.StateVersion, ch.State); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(w.Content) > 0 {
		if !json.Valid(w.Content) {
			return nil, fmt.Errorf("%w: held cede content is not valid JSON", ErrCorrupt)
		}
		var s string
		if w.Content[0] == '"' && json.Unmarshal(w.Content, &s) == nil {
			eff.Content = s
		} else {
			eff.Content = json.RawMessage(w.Content)
		}
	}
	return eff, nil
}

// effectState decodes the JSON state, saved at state version version, of
// a held transition to node name.
func effectState(c *machine.Charter, name string, version int, raw []byte) (any, error) {
	n := c.Node(name)
	if n == nil {
		return nil, fmt.Errorf("%w: held transition: %w: %q", machine.ErrInvalidTree, executor.ErrUnknownNode, name)
	}
	v, err := evolvedState(n, version, nil, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: held transition state of node %s: %w", machine.ErrInvalidTree, name, invalidState(err))
	}
	if err := n.ValidateState(v); err != nil {
		return nil, fmt.Errorf("%w: held transition state of node %s: %w", machine.ErrInvalidTree, name, err)
	}
	return v, nil
}
