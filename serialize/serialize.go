package serialize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// Version is the format version Marshal, MarshalTree, MarshalMessage and
// MarshalJSON write. Unmarshal and friends read it and every earlier
// version.
const Version = 1

// MaxDepth bounds the depth of an instance tree (the root is at depth 1).
// Marshal refuses deeper trees and Unmarshal rejects them, so hostile
// input cannot make decoding recurse without bound.
const MaxDepth = 256

// bodyDecoder reads the bodies of one format version.
type bodyDecoder interface {
	machine(c *machine.Charter, body []byte) (*instance.Instance, []message.Message, error)
	tree(c *machine.Charter, body []byte) (*instance.Instance, error)
	message(r *reader, s *slabs, m *message.Message) error
}

// versions are the decoders of the format versions this build reads,
// by version (nil: not read). A new version adds its decoder here and
// keeps the old ones.
var versions = []bodyDecoder{
	1: v1{},
}

// decoderOf returns the decoder of format version v, nil if this build
// does not read it.
func decoderOf(v byte) bodyDecoder {
	if int(v) < len(versions) {
		return versions[v]
	}
	return nil
}

// readable lists the versions this build reads.
func readable() string {
	var s []string
	for v, d := range versions {
		if d != nil {
			s = append(s, strconv.Itoa(v))
		}
	}
	return "version " + strings.Join(s, ", ")
}

// Marshal encodes the machine — its instance tree with every suspension
// and held reply, and its history — in the msgpack form. States are
// encoded with their node's (and pack's) state type. Call it between runs,
// not while the machine runs.
func Marshal(m *machine.Machine) ([]byte, error) {
	return encodeMachine(m, msgpackStates{}, kindMachine, (*encoder).writeMachine)
}

// encodeMachine encodes m with write, states in form f: a msgpack blob of
// kind k, or no bytes when k is 0 (write keeps the result).
func encodeMachine(m *machine.Machine, f stateForm, k byte, write func(*encoder, *machineModel)) ([]byte, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil machine", ErrEncode)
	}
	var err error
	var b []byte
	access.MachineView(m, func(root *instance.Instance, h message.History) {
		history := h.Messages()
		if k != 0 {
			b = header(make([]byte, 0, sizeHint(k, root, history)), k)
		}
		e := newWireEncoder(m.Charter(), f, b)
		e.machine = machineModel{Root: root, History: history}
		write(e, &e.machine)
		b, err = e.release()
	})
	if err != nil || k == 0 {
		return nil, err
	}
	return seal(b), nil
}

// sizeHint estimates the encoded size of a blob of kind k of a machine
// with root and history.
func sizeHint(k byte, root *instance.Instance, history []message.Message) int {
	n := 1024
	if k != kindMachine {
		return n
	}
	for range root.Walk() {
		n += instanceSize
	}
	for i := range history {
		n += messageSize(&history[i])
	}
	return n + n/16
}

// instanceSize is about what an instance takes encoded: its ID, node,
// state and, now and then, a suspension.
const instanceSize = 128

// messageSize estimates the encoded size of m without an envelope: keys,
// headers and the strings that repeat (roles, IDs, names), written as
// references, take a few bytes each.
func messageSize(m *message.Message) int {
	n := 8
	if m.Source != (message.Source{}) {
		n += 16
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		n += 10 + len(p.Text) + len(p.Data) + len(p.Signature)
		if p.ID != "" {
			n += 8
		}
	}
	return n
}

// Unmarshal decodes a machine written by Marshal (any version this build
// reads) for the charter c: nodes and packs are resolved by name, states
// decoded into their node's type, and the tree is validated with
// machine.Restore. Corrupt, truncated or hostile input gives an error
// wrapping ErrCorrupt (never a panic); a newer format, ErrVersion.
func Unmarshal(c *machine.Charter, data []byte) (*machine.Machine, error) {
	if c == nil {
		return nil, errors.New("serialize: nil charter")
	}
	dec, body, err := open(data, kindMachine)
	if err != nil {
		return nil, err
	}
	root, history, err := dec.machine(c, body)
	if err != nil {
		return nil, err
	}
	return machine.Restore(c, root, message.NewHistory(history))
}

// MarshalTree encodes the machine's instance tree alone (with its
// suspensions and held replies, without history), for stores that keep
// the history apart, message by message (MarshalMessage). Assemble puts
// them back together.
func MarshalTree(m *machine.Machine) ([]byte, error) {
	return encodeMachine(m, msgpackStates{}, kindTree, func(e *encoder, mm *machineModel) {
		writeNonNil(e, "instance", mm.Root, e.writeInstance)
	})
}

// MarshalMessage encodes one history message, in its own envelope so that
// an append-only history may span format versions.
func MarshalMessage(msg message.Message) ([]byte, error) {
	e := newWireEncoder(nil, msgpackStates{}, header(make([]byte, 0, headerSize+messageSize(&msg)), kindMessage))
	e.writeMessage(&msg)
	b, err := e.release()
	if err != nil {
		return nil, err
	}
	return seal(b), nil
}

// UnmarshalMessage decodes a message written by MarshalMessage.
func UnmarshalMessage(data []byte) (message.Message, error) {
	return unmarshalMessage(data, &slabs{exact: true})
}

func unmarshalMessage(data []byte, s *slabs) (message.Message, error) {
	dec, body, err := open(data, kindMessage)
	if err != nil {
		return message.Message{}, err
	}
	var m message.Message
	err = dec.message(newReader(body), s, &m)
	return m, err
}

// Assemble rebuilds a machine from a tree written by MarshalTree and the
// history messages written by MarshalMessage, in order, and validates it
// like Unmarshal.
func Assemble(c *machine.Charter, tree []byte, history [][]byte) (*machine.Machine, error) {
	return AssembleOnto(c, tree, message.History{}, history)
}

// AssembleOnto is Assemble for a caller that has the first messages of
// the history decoded already: the machine's history is prefix followed
// by tail, decoded. A caller that keeps a machine's decoded history
// between loads (a machine's history is a message.History) decodes only
// what was appended since, and the restored machine does not read the
// prefix again. The machine takes prefix over: the tail is appended to
// it, into its spare room when it has enough; messages in prefix are
// only read.
func AssembleOnto(c *machine.Charter, tree []byte, prefix message.History, tail [][]byte) (*machine.Machine, error) {
	if c == nil {
		return nil, errors.New("serialize: nil charter")
	}
	dec, body, err := open(tree, kindTree)
	if err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	root, err := dec.tree(c, body)
	if err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	h, err := decodeOnto(prefix, tail)
	if err != nil {
		return nil, err
	}
	return machine.Restore(c, root, h)
}

// decodeOnto decodes tail after prefix, in place into an array of its
// own: a whole history (onto an empty prefix) becomes the history, with
// room to grow; a tail is appended to prefix.
func decodeOnto(prefix message.History, tail [][]byte) (message.History, error) {
	if len(tail) == 0 {
		return prefix, nil
	}
	n, room := prefix.Len(), len(tail)
	if n == 0 {
		room = roomFor(room)
	}
	h := make([]message.Message, len(tail), room)
	// A short tail gets allocations of its own rather than slabs sized
	// for a whole history.
	b := newBatch(tail, len(tail) < shortTail)
	for i, data := range tail {
		if err := b.next(data, &h[i]); err != nil {
			return message.History{}, fmt.Errorf("history message %d: %w", n+i, err)
		}
	}
	if n == 0 {
		return message.NewHistory(h), nil
	}
	prefix.Append(h...)
	return prefix, nil
}

// shortTail is the length under which AssembleOnto decodes a tail
// without slabs.
const shortTail = 16

// batch decodes the entries of a history one after the other, without an
// allocation of each: their strings are cut from one copy of them all,
// and one reader, with its dictionary, reads each in turn.
type batch struct {
	slabs
	r reader
	// all is every entry, one after the other; at is where the next one
	// starts.
	all string
	at  int
}

// newBatch returns a batch for entries, its slabs exact if set.
func newBatch(entries [][]byte, exact bool) *batch {
	n := 0
	for _, e := range entries {
		n += len(e)
	}
	var all strings.Builder
	all.Grow(n)
	for _, e := range entries {
		all.Write(e)
	}
	return &batch{slabs: slabs{exact: exact}, all: all.String()}
}

// next decodes data, the batch's next entry, into m.
func (b *batch) next(data []byte, m *message.Message) error {
	b.at += len(data)
	dec, body, err := open(data, kindMessage)
	if err != nil {
		return err
	}
	b.r.b, b.r.str, b.r.off, b.r.dict = body, b.all[b.at-len(body):b.at], 0, b.r.dict[:0]
	return dec.message(&b.r, &b.slabs, m)
}
