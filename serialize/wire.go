package serialize

import (
	"encoding/json"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/markov-agents/markov/llm"
)

// The v1 wire model. These structs are the specification of the format:
// their msgpack tags are the keys of the msgpack form and their json tags
// the keys of the JSON form. They are separate from the in-memory types so
// that renaming a Go field never changes stored bytes. Never change a tag
// or a field's meaning; add a field with a new key, or add a version.
//
// Fields tagged intern hold strings that repeat (IDs, names, roles): in the
// msgpack form the first occurrence of such a string (3 bytes or more) is
// written in full and numbered, in order, within the blob; later
// occurrences in intern fields are an extension value (type -128) holding
// its number, as the msgpack library's intern option does. A reader must
// therefore see every intern field: a new field that interns needs a new
// version.
//
// These structs are the one place a field is declared. wiregen
// (internal/wiregen, run by go generate) writes wire_gen.go from them: the
// msgpack writer and reader of the in-memory type each stands for
// (//wire:model), straight to and from that type for speed, and the
// conversions to and from the structs that the JSON form encodes. Fields
// tagged wire:"hook" depend on the charter and are filled and used by
// hand (encode.go, decode.go). A test fails when wire_gen.go is not what
// wiregen writes; codec_test.go checks that the generated code writes
// exactly the bytes the msgpack library writes for these structs with the
// pinned configuration, and reads them back.
//
//go:generate go run ./internal/wiregen

// wireMachine is a whole machine: the instance tree and the history.
//
//wire:model machineModel
type wireMachine struct {
	Root    *wireInstance `msgpack:"r" json:"r"`
	History []wireMessage `msgpack:"h,omitempty" json:"h,omitempty"`
}

// wireInstance is one instance of the tree.
//
// States are encoded with their node's (or pack's) state type: in the
// msgpack form natively under "s" (and "p"), or as JSON bytes under "sj"
// (and "pj") when the type has JSON encoding methods msgpack does not
// understand; in the JSON form as JSON values under "s" (and "p").
// StateVersion is the node's state version (node.Config.StateVersion) the
// state was saved at, PackVersions the packs' (node.PackMigration), by
// pack name; both omitted when 0. They are the hand-written hooks' to fill
// and use (fillInstance, useInstance): a state's encoding depends on its
// node.
//
//wire:model instance.Instance
type wireInstance struct {
	ID              string                        `msgpack:"i,intern" json:"i"`
	Node            string                        `msgpack:"n,intern" json:"n"`
	State           msgpack.RawMessage            `msgpack:"s,omitempty" json:"-" wire:"hook"`
	StateJSON       json.RawMessage               `msgpack:"sj,omitempty" json:"s,omitempty" wire:"hook"`
	StateVersion    int                           `msgpack:"sv,omitempty" json:"sv,omitempty" wire:"hook"`
	Children        []*wireInstance               `msgpack:"c,omitempty" json:"c,omitempty"`
	Packs           map[string]msgpack.RawMessage `msgpack:"p,omitempty" json:"-" wire:"hook"`
	PacksJSON       map[string]json.RawMessage    `msgpack:"pj,omitempty" json:"p,omitempty" wire:"hook"`
	PackVersions    map[string]int                `msgpack:"pv,omitempty" json:"pv,omitempty" wire:"hook"`
	Suspension      *wireSuspension               `msgpack:"u,omitempty" json:"u,omitempty"`
	Idle            bool                          `msgpack:"d,omitempty" json:"d,omitempty"`
	MaxTokensStreak int                           `msgpack:"m,omitempty" json:"m,omitempty"`
	Reply           msgpack.RawMessage            `msgpack:"y,omitempty" json:"-" wire:"hook"`
	ReplyJSON       json.RawMessage               `msgpack:"yj,omitempty" json:"y,omitempty" wire:"hook"`
}

// wireInFlight is instance.Reply, a model reply saved at a checkpoint
// before its tools ran (wireInstance.Reply and ReplyJSON, omitted when
// nil). The hooks (fillInstance, useInstance) write it as a msgpack value
// of its own, with its own interned strings, so that a reader that does
// not know the field skips it without losing track of the blob's
// dictionary (it then calls the model again).
//
//wire:model instance.Reply
type wireInFlight struct {
	Message wireMessage `msgpack:"m" json:"m"`
	Stop    string      `msgpack:"s,omitempty" json:"s,omitempty"`
	Usage   *wireUsage  `msgpack:"u,omitempty" json:"u,omitempty" wire:"byvalue"`
}

// wireUsage is llm.Usage; omitted when zero.
//
//wire:model llm.Usage
type wireUsage struct {
	InputTokens      int `msgpack:"i,omitempty" json:"i,omitempty"`
	OutputTokens     int `msgpack:"o,omitempty" json:"o,omitempty"`
	CacheReadTokens  int `msgpack:"cr,omitempty" json:"cr,omitempty"`
	CacheWriteTokens int `msgpack:"cw,omitempty" json:"cw,omitempty"`
}

// wireUsage has llm.Usage's fields exactly: this conversion stops
// compiling when they part.
var _ = llm.Usage(wireUsage{})

// wireSuspension is instance.SuspensionState.
//
//wire:model instance.SuspensionState
type wireSuspension struct {
	Calls []wireCall `msgpack:"c,omitempty" json:"c,omitempty"`
	Reply *wireReply `msgpack:"r,omitempty" json:"r,omitempty"`
}

// wireCall is instance.SuspendedCall. Input holds raw JSON; in the JSON
// form an input that is not valid JSON goes to InputBytes instead.
//
//wire:model instance.SuspendedCall
type wireCall struct {
	SuspendID   string          `msgpack:"i,intern" json:"i"`
	InstanceID  string          `msgpack:"n,omitempty,intern" json:"n,omitempty"`
	ToolUseID   string          `msgpack:"u,omitempty,intern" json:"u,omitempty"`
	Kind        string          `msgpack:"k,omitempty,intern" json:"k,omitempty"`
	Initiator   string          `msgpack:"b,omitempty,intern" json:"b,omitempty"`
	Name        string          `msgpack:"a,omitempty,intern" json:"a,omitempty"`
	Input       json.RawMessage `msgpack:"in,omitempty" json:"in,omitempty"`
	InputBytes  []byte          `msgpack:"-" json:"inb,omitempty" wire:"invalid=Input"`
	Metadata    json.RawMessage `msgpack:"md,omitempty" json:"md,omitempty"`
	Reason      string          `msgpack:"r,omitempty" json:"r,omitempty"`
	SuspendedAt time.Time       `msgpack:"at,omitempty" json:"at,omitzero"`
	Deadline    time.Time       `msgpack:"dl,omitempty" json:"dl,omitzero"`
	OnTimeout   *wireTimeout    `msgpack:"ot,omitempty" json:"ot,omitempty" wire:"byvalue"`
	Status      string          `msgpack:"s,omitempty,intern" json:"s,omitempty"`
	Stage       int             `msgpack:"g,omitempty" json:"g,omitempty"`
	// PayloadSchema is the JSON Schema of the resume payload (raw JSON).
	PayloadSchema json.RawMessage `msgpack:"ps,omitempty" json:"ps,omitempty"`
	// Event is the named event the call waits for besides a resume
	// (instance.WithEvent); not interned, so a reader that does not know
	// the key skips it.
	Event string `msgpack:"ev,omitempty" json:"ev,omitempty"`
	// TraceParent is the W3C traceparent of the span that created the
	// suspension (not interned: a reader that does not know the key
	// skips it).
	TraceParent string `msgpack:"tp,omitempty" json:"tp,omitempty"`
	// Governance is the call's policy and decisions (instance.WithPolicy)
	// as JSON ({"policy", "decisions"}), converted by hand (fillCall,
	// useCall); Digest is the call's digest. A reader that does not know
	// the keys skips them.
	Governance json.RawMessage `msgpack:"gv,omitempty" json:"gv,omitempty" wire:"hook"`
	Digest     string          `msgpack:"dg,omitempty" json:"dg,omitempty"`
}

// wireTimeout is instance.TimeoutAction; omitted when zero.
//
//wire:model instance.TimeoutAction
type wireTimeout struct {
	Resume  bool            `msgpack:"r,omitempty" json:"r,omitempty"`
	Payload json.RawMessage `msgpack:"p,omitempty" json:"p,omitempty"`
	IsError bool            `msgpack:"e,omitempty" json:"e,omitempty"`
	// Summarize is instance.OnTimeoutSummary's action.
	Summarize bool `msgpack:"s,omitempty" json:"s,omitempty"`
	// Deny is instance.OnTimeoutDeny's refusal.
	Deny bool `msgpack:"d,omitempty" json:"d,omitempty"`
}

// wireReply is instance.HeldReply. A pending result slot is an empty part.
// The transition is converted by hand (fillReply, useReply): its states
// are decoded with their target node's type.
//
//wire:model instance.HeldReply
type wireReply struct {
	Message    wireMessage   `msgpack:"m" json:"m"`
	Results    []wirePart    `msgpack:"r,omitempty" json:"r,omitempty"`
	Transition *wireEffect   `msgpack:"t,omitempty" json:"t,omitempty" wire:"hook"`
	Terminal   bool          `msgpack:"x,omitempty" json:"x,omitempty"`
	Deferred   []wireMessage `msgpack:"d,omitempty" json:"d,omitempty"`
}

// wireEffect is a held instance.Effect. States are JSON of the target
// node's state type, at the state version after them (omitted when 0);
// Content is the JSON of the cede content.
type wireEffect struct {
	Kind         uint8           `msgpack:"k" json:"k"`
	Target       string          `msgpack:"t,omitempty,intern" json:"t,omitempty"`
	State        json.RawMessage `msgpack:"s,omitempty" json:"s,omitempty"`
	StateVersion int             `msgpack:"sv,omitempty" json:"sv,omitempty"`
	Children     []wireChild     `msgpack:"c,omitempty" json:"c,omitempty"`
	Content      json.RawMessage `msgpack:"x,omitempty" json:"x,omitempty"`
}

// wireChild is instance.Child.
type wireChild struct {
	ID           string          `msgpack:"i,omitempty,intern" json:"i,omitempty"`
	Node         string          `msgpack:"n,intern" json:"n"`
	State        json.RawMessage `msgpack:"s,omitempty" json:"s,omitempty"`
	StateVersion int             `msgpack:"sv,omitempty" json:"sv,omitempty"`
}

// wireMessage is message.Message.
//
//wire:model message.Message
//wire:alloc newMessages
type wireMessage struct {
	Role   string     `msgpack:"r,intern" json:"r"`
	Parts  []wirePart `msgpack:"p,omitempty" json:"p,omitempty"`
	Source wireSource `msgpack:"s,omitempty" json:"s,omitzero"`
	Silent bool       `msgpack:"q,omitempty" json:"q,omitempty"`
}

// wireSource is message.Source; omitted when zero.
//
//wire:model message.Source
type wireSource struct {
	InstanceID string `msgpack:"i,omitempty,intern" json:"i,omitempty"`
	Node       string `msgpack:"n,omitempty,intern" json:"n,omitempty"`
	To         string `msgpack:"t,omitempty,intern" json:"t,omitempty"`
}

// wirePart is message.Part. Data holds raw JSON; in the JSON form data
// that is not valid JSON goes to DataBytes instead.
//
//wire:model message.Part
//wire:alloc newParts
type wirePart struct {
	Kind      uint8           `msgpack:"k,omitempty" json:"k,omitempty"`
	Text      string          `msgpack:"t,omitempty" json:"t,omitempty"`
	ID        string          `msgpack:"i,omitempty,intern" json:"i,omitempty"`
	Name      string          `msgpack:"n,omitempty,intern" json:"n,omitempty"`
	Data      json.RawMessage `msgpack:"d,omitempty" json:"d,omitempty"`
	DataBytes []byte          `msgpack:"-" json:"db,omitempty" wire:"invalid=Data"`
	IsError   bool            `msgpack:"e,omitempty" json:"e,omitempty"`
	Signature string          `msgpack:"g,omitempty" json:"g,omitempty"`
	SuspendID string          `msgpack:"u,omitempty,intern" json:"u,omitempty"`
}

// jsonDoc is the JSON form of a machine: the wire model with its format
// name and version inline.
type jsonDoc struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	wireMachine
}
