package serialize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// The JSON form: the wire model (wire.go) through encoding/json, with
// states as JSON values, wrapped as
//
//	{"format":"markov","version":1,"r":{…root…},"h":[…history…]}
//
// Raw JSON values (tool inputs, metadata, payloads) are embedded as JSON:
// they keep their meaning but not their insignificant whitespace. Tool-use
// data or call input that is not valid JSON is kept as base64 under "db" or
// "inb". Strings must be valid UTF-8 to survive: the msgpack form is the
// exact one.

// jsonFormat is the format name of the JSON form.
const jsonFormat = "markov"

// MarshalJSON encodes the machine in the JSON form: the same wire model as
// Marshal, for debugging and interop. Call it between runs.
func MarshalJSON(m *machine.Machine) ([]byte, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil machine", ErrEncode)
	}
	var w *wireMachine
	var err error
	m.View(func(root *instance.Instance, history []message.Message) {
		w, err = toWire(m.Charter(), root, history, jsonStates{})
	})
	if err != nil {
		return nil, err
	}
	b, err := encodeJSON(jsonDoc{Format: jsonFormat, Version: Version, wireMachine: *w})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	return b, nil
}

// UnmarshalJSON decodes a machine written by MarshalJSON for the charter
// c, like Unmarshal.
func UnmarshalJSON(c *machine.Charter, data []byte) (*machine.Machine, error) {
	if c == nil {
		return nil, errors.New("serialize: nil charter")
	}
	var doc jsonDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		// A newer version may have another shape: report the version.
		var h struct {
			Format  string `json:"format"`
			Version int    `json:"version"`
		}
		if json.Unmarshal(data, &h) == nil && h.Format == jsonFormat && h.Version > Version {
			return nil, fmt.Errorf("%w: format version %d (this build reads %s)", ErrVersion, h.Version, readable())
		}
		if bytes.HasPrefix(data, []byte(magic)) {
			return nil, fmt.Errorf("%w: msgpack data, not JSON: use Unmarshal", ErrCorrupt)
		}
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if doc.Format != jsonFormat {
		return nil, fmt.Errorf("%w: not a markov machine (format %q)", ErrCorrupt, doc.Format)
	}
	if doc.Version < 1 {
		return nil, fmt.Errorf("%w: no format version", ErrCorrupt)
	}
	if doc.Version != Version {
		return nil, fmt.Errorf("%w: format version %d (this build reads %s)", ErrVersion, doc.Version, readable())
	}
	root, history, err := fromWire(c, &doc.wireMachine)
	if err != nil {
		return nil, err
	}
	return machine.Restore(c, root, history)
}

// stateForm encodes states for one form: msgpack or JSON bytes.
type stateForm interface {
	encode(t reflect.Type, v any) (mp, js []byte, err error)
	// jsonForm reports whether raw JSON fields must be valid JSON.
	jsonForm() bool
}

// jsonStates encodes states as JSON.
type jsonStates struct{}

func (jsonStates) encode(_ reflect.Type, v any) ([]byte, []byte, error) {
	js, err := encodeJSON(v)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: state of type %T: %w", ErrEncode, v, err)
	}
	return nil, js, nil
}

func (jsonStates) jsonForm() bool { return true }

// toWire converts a machine to the wire model.
func toWire(c *machine.Charter, root *instance.Instance, history []message.Message, f stateForm) (*wireMachine, error) {
	e := encoder{c: c}
	r, err := e.toWireInstance(root, 1, f)
	if err != nil {
		return nil, err
	}
	return &wireMachine{Root: r, History: toWireMessages(history, f.jsonForm())}, nil
}

// toWireMessages converts messages to the wire model (nil when empty).
func toWireMessages(msgs []message.Message, jsonForm bool) []wireMessage {
	if len(msgs) == 0 {
		return nil
	}
	w := make([]wireMessage, len(msgs))
	for i := range msgs {
		w[i] = toWireMessage(&msgs[i], jsonForm)
	}
	return w
}

func (e *encoder) toWireInstance(in *instance.Instance, depth int, f stateForm) (*wireInstance, error) {
	if in == nil {
		return nil, fmt.Errorf("%w: nil instance", ErrEncode)
	}
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: %w: instance tree deeper than %d", ErrEncode, ErrLimit, MaxDepth)
	}
	w := &wireInstance{ID: in.ID, Node: in.Node, StateVersion: e.stateVersion(in.Node), Idle: in.Idle, MaxTokensStreak: in.MaxTokensStreak}
	var err error
	if w.State, w.StateJSON, err = f.encode(e.stateType(in.Node, in.State), in.State); err != nil {
		return nil, fmt.Errorf("instance %s: %w", in.ID, err)
	}
	names := make([]string, 0, len(in.Packs))
	for name := range in.Packs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v := in.Packs[name]
		mp, js, err := f.encode(e.packType(name, v), v)
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", name, err)
		}
		if v := e.packVersion(name); v != 0 {
			if w.PackVersions == nil {
				w.PackVersions = map[string]int{}
			}
			w.PackVersions[name] = v
		}
		if js != nil {
			if w.PacksJSON == nil {
				w.PacksJSON = map[string]json.RawMessage{}
			}
			w.PacksJSON[name] = js
		} else {
			if w.Packs == nil {
				w.Packs = map[string]msgpack.RawMessage{}
			}
			w.Packs[name] = mp
		}
	}
	for _, ch := range in.Children {
		wc, err := e.toWireInstance(ch, depth+1, f)
		if err != nil {
			return nil, err
		}
		w.Children = append(w.Children, wc)
	}
	if s := in.Suspension; s != nil {
		w.Suspension = &wireSuspension{}
		for i := range s.Calls {
			wc, err := toWireCall(&s.Calls[i], f.jsonForm())
			if err != nil {
				return nil, fmt.Errorf("instance %s: %w", in.ID, err)
			}
			w.Suspension.Calls = append(w.Suspension.Calls, wc)
		}
		if r := s.Reply; r != nil {
			wr := &wireReply{Message: toWireMessage(&r.Message, f.jsonForm()), Terminal: r.Terminal, Deferred: toWireMessages(r.Deferred, f.jsonForm())}
			for i := range r.Results {
				wr.Results = append(wr.Results, toWirePart(&r.Results[i], f.jsonForm()))
			}
			if r.Transition != nil {
				eff, err := e.toWireEffect(r.Transition)
				if err != nil {
					return nil, fmt.Errorf("instance %s: %w", in.ID, err)
				}
				wr.Transition = &eff
			}
			w.Suspension.Reply = wr
		}
	}
	return w, nil
}

func toWireCall(c *instance.SuspendedCall, jsonForm bool) (wireCall, error) {
	w := wireCall{
		SuspendID: c.SuspendID, InstanceID: c.InstanceID, ToolUseID: c.ToolUseID,
		Kind: string(c.Kind), Initiator: string(c.Initiator), Name: c.Name,
		Input: c.Input, Metadata: c.Metadata, Reason: c.Reason,
		SuspendedAt: utc(c.SuspendedAt), Deadline: utc(c.Deadline),
		Status: string(c.Status), Stage: c.Stage, PayloadSchema: c.PayloadSchema,
	}
	if !timeoutZero(&c.OnTimeout) {
		w.OnTimeout = &wireTimeout{Resume: c.OnTimeout.Resume, Payload: c.OnTimeout.Payload, IsError: c.OnTimeout.IsError}
	}
	if jsonForm {
		if !jsonValid(w.Input) {
			w.Input, w.InputBytes = nil, c.Input
		}
		if !jsonValid(w.Metadata) {
			return w, fmt.Errorf("%w: suspension %s: metadata is not valid JSON", ErrEncode, c.SuspendID)
		}
		if !jsonValid(w.PayloadSchema) {
			return w, fmt.Errorf("%w: suspension %s: payload schema is not valid JSON", ErrEncode, c.SuspendID)
		}
		if w.OnTimeout != nil && !jsonValid(w.OnTimeout.Payload) {
			return w, fmt.Errorf("%w: suspension %s: on-timeout payload is not valid JSON", ErrEncode, c.SuspendID)
		}
	}
	return w, nil
}

// utc returns t in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func toWireMessage(m *message.Message, jsonForm bool) wireMessage {
	w := wireMessage{
		Role:   string(m.Role),
		Source: wireSource{InstanceID: m.Source.InstanceID, Node: m.Source.Node, To: m.Source.To},
		Silent: m.Silent,
	}
	if len(m.Parts) > 0 {
		w.Parts = make([]wirePart, len(m.Parts))
		for i := range m.Parts {
			w.Parts[i] = toWirePart(&m.Parts[i], jsonForm)
		}
	}
	return w
}

func toWirePart(p *message.Part, jsonForm bool) wirePart {
	w := wirePart{
		Kind: uint8(p.Kind), Text: p.Text, ID: p.ID, Name: p.Name, Data: p.Data,
		IsError: p.IsError, Signature: p.Signature, SuspendID: p.SuspendID,
	}
	if jsonForm && !jsonValid(p.Data) {
		w.Data, w.DataBytes = nil, p.Data
	}
	return w
}

// fromWire converts the wire model to a tree and history, resolving nodes
// and packs through c.
func fromWire(c *machine.Charter, w *wireMachine) (*instance.Instance, []message.Message, error) {
	if w.Root == nil {
		return nil, nil, fmt.Errorf("%w: machine without a root instance", ErrCorrupt)
	}
	root, err := fromWireInstance(c, w.Root, 1)
	if err != nil {
		return nil, nil, err
	}
	return root, fromWireMessages(w.History), nil
}

// fromWireMessages converts wire messages back (nil when empty).
func fromWireMessages(w []wireMessage) []message.Message {
	if len(w) == 0 {
		return nil
	}
	msgs := make([]message.Message, len(w))
	for i := range w {
		msgs[i] = fromWireMessage(&w[i])
	}
	return msgs
}

func fromWireInstance(c *machine.Charter, w *wireInstance, depth int) (*instance.Instance, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: %w: instance tree deeper than %d", ErrCorrupt, ErrLimit, MaxDepth)
	}
	if w == nil {
		return nil, fmt.Errorf("%w: nil instance", ErrCorrupt)
	}
	in := &instance.Instance{ID: w.ID, Node: w.Node, Idle: w.Idle, MaxTokensStreak: w.MaxTokensStreak}
	n := c.Node(w.Node)
	if n == nil {
		return nil, fmt.Errorf("%w: instance %s: %w: %q", machine.ErrInvalidTree, w.ID, executor.ErrUnknownNode, w.Node)
	}
	var err error
	if err = checkState(w.State, w.StateJSON); err == nil {
		in.State, err = evolvedState(n, w.StateVersion, w.State, w.StateJSON)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: instance %s: state of node %s: %w", machine.ErrInvalidTree, w.ID, w.Node, invalidState(err))
	}
	if len(w.Packs)+len(w.PacksJSON) > 0 {
		in.Packs = make(map[string]any, len(w.Packs)+len(w.PacksJSON))
		for name, raw := range w.Packs {
			if err := wirePack(c, in.Packs, name, w.PackVersions[name], raw, nil); err != nil {
				return nil, err
			}
		}
		for name, raw := range w.PacksJSON {
			if err := wirePack(c, in.Packs, name, w.PackVersions[name], nil, raw); err != nil {
				return nil, err
			}
		}
	}
	for _, wc := range w.Children {
		ch, err := fromWireInstance(c, wc, depth+1)
		if err != nil {
			return nil, err
		}
		in.Children = append(in.Children, ch)
	}
	if ws := w.Suspension; ws != nil {
		s := &instance.SuspensionState{}
		for _, wc := range ws.Calls {
			s.Calls = append(s.Calls, fromWireCall(&wc))
		}
		if wr := ws.Reply; wr != nil {
			r := &instance.HeldReply{Message: fromWireMessage(&wr.Message), Terminal: wr.Terminal, Deferred: fromWireMessages(wr.Deferred)}
			for i := range wr.Results {
				r.Results = append(r.Results, fromWirePart(&wr.Results[i]))
			}
			if wr.Transition != nil {
				if r.Transition, err = fromWireEffect(c, wr.Transition); err != nil {
					return nil, err
				}
			}
			s.Reply = r
		}
		in.Suspension = s
	}
	return in, nil
}

// wirePack decodes the state of pack name, saved at state version version,
// into packs.
func wirePack(c *machine.Charter, packs map[string]any, name string, version int, mp, js []byte) error {
	p := c.Pack(name)
	if p == nil {
		return fmt.Errorf("%w: unknown pack %q", machine.ErrInvalidTree, name)
	}
	err := checkState(mp, js)
	var v any
	if err == nil {
		v, err = evolvedState(p, version, mp, js)
	}
	if err != nil {
		return fmt.Errorf("%w: pack %s: %w", machine.ErrInvalidTree, name, invalidState(err))
	}
	packs[name] = v
	return nil
}

// checkState checks the structure of a state's msgpack bytes in the wire
// model before they are decoded (JSON needs no check).
func checkState(mp, js []byte) error {
	if len(js) == 0 && len(mp) > 0 {
		r := newReader(mp)
		if _, err := r.value(maxStateDepth); err != nil {
			return err
		}
		if r.left() != 0 {
			return r.errAt("trailing bytes after state")
		}
	}
	return nil
}

func fromWireCall(w *wireCall) instance.SuspendedCall {
	c := instance.SuspendedCall{
		SuspendID: w.SuspendID, InstanceID: w.InstanceID, ToolUseID: w.ToolUseID,
		Kind: instance.CallKind(w.Kind), Initiator: instance.Initiator(w.Initiator), Name: w.Name,
		Input: nilIfEmpty(w.Input), Metadata: nilIfEmpty(w.Metadata), Reason: w.Reason,
		SuspendedAt: utc(w.SuspendedAt), Deadline: utc(w.Deadline),
		Status: instance.Status(w.Status), Stage: w.Stage, PayloadSchema: nilIfEmpty(w.PayloadSchema),
	}
	if len(w.InputBytes) > 0 {
		c.Input = w.InputBytes
	}
	if t := w.OnTimeout; t != nil {
		c.OnTimeout = instance.TimeoutAction{Resume: t.Resume, Payload: nilIfEmpty(t.Payload), IsError: t.IsError}
	}
	return c
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func fromWireMessage(w *wireMessage) message.Message {
	m := message.Message{
		Role:   message.Role(w.Role),
		Source: message.Source{InstanceID: w.Source.InstanceID, Node: w.Source.Node, To: w.Source.To},
		Silent: w.Silent,
	}
	if len(w.Parts) > 0 {
		m.Parts = make([]message.Part, len(w.Parts))
		for i := range w.Parts {
			m.Parts[i] = fromWirePart(&w.Parts[i])
		}
	}
	return m
}

func fromWirePart(w *wirePart) message.Part {
	p := message.Part{
		Kind: message.Kind(w.Kind), Text: w.Text, ID: w.ID, Name: w.Name, Data: nilIfEmpty(w.Data),
		IsError: w.IsError, Signature: w.Signature, SuspendID: w.SuspendID,
	}
	if len(w.DataBytes) > 0 {
		p.Data = w.DataBytes
	}
	return p
}
