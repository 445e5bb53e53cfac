// Package serialize owns the persisted format of a machine: its instance
// tree (IDs, node names, typed states, children, pack states, idle flags,
// every suspension record and held reply) and its history, as versioned
// msgpack — plus a JSON form of the same model for debugging and interop.
//
//	data, err := serialize.Marshal(m)       // park it anywhere
//	…
//	m, err := serialize.Unmarshal(charter, data) // maybe in another process
//	for step, err := range m.Run(ctx, machine.ResumeInput{SuspendID: id, Payload: p}) { … }
//
// Stores that keep the tree and an append-only history apart use
// MarshalTree, MarshalMessage and Assemble: saving a step then costs the
// tree and the new messages, whatever the length of the history.
//
// # Nodes and states
//
// Nodes and packs are written by name and resolved through the charter on
// decode; a name the charter does not know fails with an error wrapping
// machine.ErrInvalidTree and executor.ErrUnknownNode. A state is encoded
// with its node's state type and decoded into a new value of that type,
// then validated (machine.Restore). In the msgpack form a state is native
// msgpack, with struct fields named by their json tags (a msgpack tag wins
// when present), map keys sorted and times as UTC timestamps; a state type
// with JSON encoding methods msgpack does not use (MarshalJSON without
// MarshalText, MarshalBinary or EncodeMsgpack) is stored as its JSON
// instead. Values in interface fields come back as JSON would give them,
// except numbers: int64, uint64 or float64 as they were encoded.
//
// States decode strictly, in both forms and at any depth: a persisted
// state (or pack state) with a field its type lacks — renamed or removed
// since it was saved — fails to load with an *UnknownFieldsError naming
// every such field (wrapping ErrUnknownFields, instance.ErrInvalidState and
// machine.ErrInvalidTree), rather than loading without that field's data.
// A node whose state type changed declares node.Config.StateVersion and
// Migrate (a pack, node.PackMigration): every state is saved with its
// node's or pack's state version (omitted when 0), and a state saved at an older version is handed to Migrate as
// JSON, with that version, instead of being decoded; a failed migration
// wraps node.ErrMigration. A state saved at a version above the node's
// (by a newer build) fails with ErrStateVersion.
//
// A transition held until a suspension is resolved keeps its states as
// JSON, with their state version, decoded (or migrated) with the target
// node's type and validated. Its cede
// content is JSON too: it comes back as a string when it was one, and as
// json.RawMessage otherwise (so the text the parent receives is the same).
//
// # Format (version 1)
//
// A msgpack blob is a 10-byte envelope and a body:
//
//	"MRKV"  version (1 byte)  kind (1 byte: 'm' machine, 't' tree, 'h' message)
//	CRC-32C of the body (4 bytes, big endian)  body (one msgpack value)
//
// The body is the wire model: msgpack maps with short string keys, empty
// fields omitted ([x] is a list of x, a|b either key):
//
//	machine   {r: instance, h: [message]}
//	instance  {i: ID, n: node, s: state | sj: state JSON, sv: state version, c: [instance],
//	           p: {pack: state} | pj: {pack: state JSON},
//	           pv: {pack: state version}, u: suspension,
//	           d: idle, m: max-tokens streak}
//	suspension {c: [call], r: held reply}
//	call      {i: suspend ID, n: instance ID, u: tool-use ID, k: kind,
//	           b: initiator, a: name, in: input, md: metadata, r: reason,
//	           at: suspended at, dl: deadline,
//	           ot: {r: resume, p: payload, e: is error}, s: status, g: stage}
//	held reply {m: message, r: [result part], x: terminal,
//	           t: {k: effect kind, t: target, s: state JSON, sv: state version,
//	               c: [{i: ID, n: node, s: state JSON, sv: state version}],
//	               x: cede content JSON},
//	           d: [message] (user input deferred behind the reply)}
//	message   {r: role, p: [part], s: {i: instance ID, n: node, t: to}, q: silent}
//	part      {k: kind, t: text, i: ID, n: name, d: data, e: is error,
//	           g: signature, u: suspend ID}
//
// Raw JSON (inputs, metadata, payloads, data) is msgpack bin, byte for
// byte; times are msgpack timestamps. IDs, names, roles, kinds and
// statuses are interned as the msgpack library's intern option does: the
// first occurrence of such a string is written in full and numbered, later
// ones are a 3- or 4-byte reference. The unexported wire structs in
// wire.go are the reference; a new version adds a decoder and keeps the
// old ones, and testdata holds blobs of every version.
//
// The JSON form is the same model,
// {"format":"markov","version":1,"r":{…},"h":[…]}, with states as JSON
// values under "s" and "p", raw JSON embedded as JSON (compacted), no
// interning, and data or input that is not valid JSON kept as base64 under
// "db" or "inb". Its strings are JSON strings, so invalid UTF-8 in them is
// replaced; the same holds for what the msgpack form stores as JSON
// (states of JSON-only types, held transitions).
//
// # Hostile input
//
// Decoding never panics and never trusts a length: every msgpack header is
// checked against the bytes left before anything is allocated, trees
// deeper than MaxDepth and state values nested deeper than 512 levels are
// rejected (ErrLimit), and the checksum catches truncation and accidental
// corruption (ErrCorrupt). Memory use is bounded by a small multiple of
// the input size. Callers that accept untrusted input should still bound
// its size.
package serialize
