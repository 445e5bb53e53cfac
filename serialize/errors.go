package serialize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors of encoding and decoding. Every decoding failure wraps ErrCorrupt,
// ErrVersion or machine.ErrInvalidTree (a well-formed machine that does not
// fit the charter: unknown node — also executor.ErrUnknownNode —, unknown
// pack, a state that does not decode into its node's type or fails its
// validation — also instance.ErrInvalidState, and ErrUnknownFields,
// ErrStateVersion or node.ErrMigration when that is why —, duplicate IDs).
var (
	// ErrCorrupt: the data is not a well-formed encoding: not markov data,
	// the wrong kind of blob, truncated, altered (checksum mismatch),
	// malformed msgpack or JSON, or beyond a decoding limit (ErrLimit).
	ErrCorrupt = errors.New("serialize: corrupt data")
	// ErrVersion: the data is of a format version this build cannot read
	// (written by a newer version of the library).
	ErrVersion = errors.New("serialize: unsupported format version")
	// ErrLimit: a tree deeper than MaxDepth, or a state value nested
	// deeper than 512 levels. Decoding errors wrap ErrCorrupt too.
	ErrLimit = errors.New("serialize: decoding limit exceeded")
	// ErrEncode: a value cannot be encoded (a state the msgpack or JSON
	// encoder refuses, a tree deeper than MaxDepth, a nil machine).
	ErrEncode = errors.New("serialize: cannot encode")
	// ErrUnknownFields: a persisted state has fields its type lacks (a
	// field renamed or removed since it was saved, and no migration of the
	// node handles it). The error is an *UnknownFieldsError naming them.
	ErrUnknownFields = errors.New("serialize: state has fields its type lacks")
	// ErrStateVersion: a state was saved at a node.Config.StateVersion
	// above the node's (written by a newer build of the node).
	ErrStateVersion = errors.New("serialize: state version newer than the node's")
)

// UnknownFieldsError is the error of a persisted state with fields its
// type lacks. It wraps ErrUnknownFields.
type UnknownFieldsError struct {
	// Fields are the unknown fields, sorted, each a dotted path from the
	// state's top level ("items", "order.note"); elements of lists and
	// maps add no segment.
	Fields []string
}

// Error names the fields and the way out: a state version and migration.
func (e *UnknownFieldsError) Error() string {
	q := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		q[i] = strconv.Quote(f)
	}
	return fmt.Sprintf("%v: %s (renamed or removed since the state was saved? give the node a StateVersion and Migrate, the pack a PackMigration)", ErrUnknownFields, strings.Join(q, ", "))
}

// Unwrap returns ErrUnknownFields.
func (e *UnknownFieldsError) Unwrap() error { return ErrUnknownFields }
