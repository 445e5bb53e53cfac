package serialize

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// The reading side of the wire codec: the decoder the generated readers
// (wire_gen.go, from wire.go) and conversions from the wire structs run
// on, and the hooks that use the fields whose decoding depends on the
// charter (useInstance, useReply). Map keys may come in any order; unknown
// keys are skipped, so a later writer may add keys without a new version
// as long as old readers can ignore them (and they do not intern strings:
// see wire.go).

// v1 decodes bodies of format version 1.
type v1 struct{}

func (v1) machine(c *machine.Charter, body []byte) (*instance.Instance, []message.Message, error) {
	d := decoder{c: c, r: newReader(body), slabs: &slabs{}}
	var m machineModel
	err := d.readMachine(&m)
	if err == nil {
		err = d.end()
	}
	if err == nil && m.Root == nil {
		err = fmt.Errorf("%w: machine without a root instance", ErrCorrupt)
	}
	return m.Root, m.History, err
}

func (v1) tree(c *machine.Charter, body []byte) (*instance.Instance, error) {
	d := decoder{c: c, r: newReader(body), slabs: &slabs{}}
	root, err := readNonNil(&d, "instance", d.readInstance)
	if err == nil {
		err = d.end()
	}
	return root, err
}

func (v1) message(r *reader, s *slabs, m *message.Message) error {
	d := decoder{r: r, slabs: s}
	err := d.readMessage(m)
	if err == nil {
		err = d.end()
	}
	return err
}

// decoder reads one body (or converts the wire structs of one machine).
type decoder struct {
	c *machine.Charter
	r *reader
	*slabs
	// depth is the depth of the instance being read (the root's is 1).
	depth int
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

// newMessages returns n zero messages with room to grow: a history
// decoded here takes the next rounds' messages without a copy.
func (s *slabs) newMessages(n int) []message.Message {
	return make([]message.Message, n, roomFor(n))
}

// roomFor is the capacity given to a decoded history of n messages.
func roomFor(n int) int { return n + n/4 + 16 }

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

// end checks that the body holds nothing more.
func (d *decoder) end() error {
	if d.r.left() != 0 {
		return d.r.errAt("%d trailing bytes", d.r.left())
	}
	return nil
}

// enter goes one level down the instance tree, failing past MaxDepth.
func (d *decoder) enter(what string) error {
	if d.depth >= MaxDepth {
		at := ""
		if d.r != nil {
			at = fmt.Sprintf(" at byte %d:", d.r.off)
		}
		return fmt.Errorf("%w:%s %w: %s tree deeper than %d", ErrCorrupt, at, ErrLimit, what, MaxDepth)
	}
	d.depth++
	return nil
}

func (d *decoder) leave() { d.depth-- }

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

// list reads an array header, checked against the bytes left.
func (d *decoder) list(what string) (int, error) {
	n, err := d.r.arrayLen()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

// The scalar readers of the generated code, generic in the in-memory
// type: each reads a value into *p.

func readStr[T ~string](d *decoder, p *T) error {
	s, err := d.r.string()
	*p = T(s)
	return err
}

func readIstr[T ~string](d *decoder, p *T) error {
	s, err := d.r.istring()
	*p = T(s)
	return err
}

func readBool(d *decoder, p *bool) error {
	v, err := d.r.bool()
	*p = v
	return err
}

func readInt[T ~int](d *decoder, p *T) error {
	v, err := d.r.intRange(-1<<31, 1<<31-1)
	*p = T(v)
	return err
}

func readUint8[T ~uint8](d *decoder, p *T) error {
	v, err := d.r.intRange(0, 255)
	*p = T(v)
	return err
}

// readBin reads raw bytes (nil when empty) from the decoder's slab.
func readBin[T ~[]byte](d *decoder, p *T) error {
	n, err := d.r.bytesLen()
	if err != nil || n <= 0 {
		*p = nil
		return err
	}
	b := d.newBytes(n)
	d.r.off += copy(b, d.r.b[d.r.off:])
	*p = b
	return nil
}

// readRaw reads one msgpack value as it is (a state), nested no deeper
// than maxStateDepth.
func readRaw[T ~[]byte](d *decoder, p *T) error {
	b, err := d.r.value(maxStateDepth)
	*p = b
	return err
}

func readTime(d *decoder, p *time.Time) error {
	t, err := d.r.time()
	*p = t
	return err
}

// readPtr reads a value into a new *p with read, or nil.
func readPtr[T any](d *decoder, p **T, read func(*T) error) error {
	if d.r.nilNext() {
		*p = nil
		return nil
	}
	*p = new(T)
	return read(*p)
}

// readNonNil reads a what into a new value with read, failing on nil.
func readNonNil[T any](d *decoder, what string, read func(*T) error) (*T, error) {
	if d.r.nilNext() {
		return nil, d.r.errAt("nil %s", what)
	}
	v := new(T)
	return v, read(v)
}

// fromWireList converts the wire structs w with conv.
func fromWireList[W, M any](w []W, conv func(*W, *M) error) ([]M, error) {
	if len(w) == 0 {
		return nil, nil
	}
	s := make([]M, len(w))
	for i := range w {
		if err := conv(&w[i], &s[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// fromWirePtr converts *w, a what, to a new value with conv, failing when
// w is nil.
func fromWirePtr[W, M any](what string, w *W, conv func(*W, *M) error) (*M, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil %s", ErrCorrupt, what)
	}
	v := new(M)
	return v, conv(w, v)
}

// readMap reads a map with string keys, each value with read.
func readMap[V any](d *decoder, p *map[string]V, read func() (V, error)) error {
	m := map[string]V{}
	*p = m
	return d.fields("map", func(k []byte) error {
		v, err := read()
		m[string(k)] = v
		return err
	})
}

// setString and setInt convert a wire struct's scalar to the in-memory
// field's type.
func setString[T ~string](p *T, s string) { *p = T(s) }

func setInt[T, S ~int | ~uint8](p *T, v S) { *p = T(v) }

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// orBytes returns a raw JSON field of the JSON form, or its bytes field
// when that holds the value.
func orBytes(raw json.RawMessage, b []byte) []byte {
	if len(b) > 0 {
		return b
	}
	return nilIfEmpty(raw)
}

// useInFlight decodes the reply in flight of w, if any (see
// fillInFlight).
func (d *decoder) useInFlight(w *wireInstance) (*instance.Reply, error) {
	var r instance.Reply
	switch {
	case len(w.ReplyJSON) > 0:
		var wr wireInFlight
		if err := json.Unmarshal(w.ReplyJSON, &wr); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if err := d.fromWireInFlight(&wr, &r); err != nil {
			return nil, err
		}
	case len(w.Reply) > 0:
		sub := decoder{c: d.c, r: newReader(w.Reply), slabs: d.slabs}
		if err := sub.readInFlight(&r); err != nil {
			return nil, err
		}
		if err := sub.end(); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	return &r, nil
}

// useInstance decodes the states in w with their node's and packs' types
// (or migrates them) into in, whose other fields are read.
func (d *decoder) useInstance(in *instance.Instance, w *wireInstance) error {
	n := d.c.Node(in.Node)
	if n == nil {
		return fmt.Errorf("%w: instance %s: %w: %q", machine.ErrInvalidTree, in.ID, executor.ErrUnknownNode, in.Node)
	}
	var err error
	if in.State, err = evolvedState(n, w.StateVersion, w.State, w.StateJSON); err != nil {
		return fmt.Errorf("%w: instance %s: state of node %s: %w", machine.ErrInvalidTree, in.ID, in.Node, invalidState(err))
	}
	if in.Reply, err = d.useInFlight(w); err != nil {
		return fmt.Errorf("instance %s: reply in flight: %w", in.ID, err)
	}
	if len(w.Packs)+len(w.PacksJSON) == 0 {
		return nil
	}
	in.Packs = make(map[string]any, len(w.Packs)+len(w.PacksJSON))
	var buf [8]string
	for _, name := range sortedKeys(buf[:0], w.Packs) {
		if err := d.pack(in.Packs, name, w.PackVersions[name], w.Packs[name], nil); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(buf[:0], w.PacksJSON) {
		if err := d.pack(in.Packs, name, w.PackVersions[name], nil, w.PacksJSON[name]); err != nil {
			return err
		}
	}
	return nil
}

// pack decodes the state of pack name, saved at state version version,
// into packs.
func (d *decoder) pack(packs map[string]any, name string, version int, mp, js []byte) error {
	p := d.c.Pack(name)
	if p == nil {
		return fmt.Errorf("%w: unknown pack %q", machine.ErrInvalidTree, name)
	}
	v, err := evolvedState(p, version, mp, js)
	if err != nil {
		return fmt.Errorf("%w: pack %s: %w", machine.ErrInvalidTree, name, invalidState(err))
	}
	packs[name] = v
	return nil
}

// invalidState returns err, a state's decoding error, wrapping
// instance.ErrInvalidState.
func invalidState(err error) error {
	if errors.Is(err, instance.ErrInvalidState) {
		return err
	}
	return fmt.Errorf("%w: %w", instance.ErrInvalidState, err)
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

// useReply decodes the held transition in w into r.
func (d *decoder) useReply(r *instance.HeldReply, w *wireReply) error {
	if w.Transition == nil {
		return nil
	}
	var err error
	r.Transition, err = fromWireEffect(d.c, w.Transition)
	return err
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
		if eff.Content, err = cedeContent(w.Content); err != nil {
			return nil, err
		}
	}
	return eff, nil
}

// cedeContent decodes held cede content: a string when it is a JSON
// string, json.RawMessage otherwise.
func cedeContent(raw []byte) (any, error) {
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%w: held cede content is not valid JSON", ErrCorrupt)
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	return json.RawMessage(raw), nil
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

// useCall decodes the governance in w into c.
func (d *decoder) useCall(c *instance.SuspendedCall, w *wireCall) error {
	if len(w.Governance) == 0 {
		return nil
	}
	var g governance
	if err := json.Unmarshal(w.Governance, &g); err != nil {
		return fmt.Errorf("%w: call %s: governance: %w", ErrCorrupt, c.SuspendID, err)
	}
	c.Policy, c.Decisions, c.InputSchema, c.RemindAt = g.Policy, g.Decisions, g.InputSchema, g.RemindAt.UTC()
	return nil
}
