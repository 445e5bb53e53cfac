package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/errtext"
)

// MaxSchema is the size, in bytes, of the largest schema a server may
// give for a tool's input or an elicitation (instance.MaxPayloadSchema).
const MaxSchema = instance.MaxPayloadSchema

// Schema turns a JSON Schema as an MCP server gives it (a tool's
// inputSchema, an elicitation's requestedSchema) into one markov uses: an
// object schema of at most MaxSchema bytes that compiles, without the
// "$schema" dialect marker (MCP servers name draft-07 or 2020-12; markov
// validates both with the same keywords). A nil schema is the empty
// object schema. Anything else fails with ErrInvalidSchema.
func Schema(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	if string(raw) == "null" {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if len(raw) > MaxSchema {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrInvalidSchema, len(raw), MaxSchema)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidSchema)
	}
	if t := string(top["type"]); t != `"object"` {
		if t == "" {
			t = "missing"
		}
		return nil, fmt.Errorf(`%w: type is %s, want "object"`, ErrInvalidSchema, errtext.Clip(t, 40))
	}
	delete(top, "$schema")
	if raw, err = json.Marshal(top); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	return raw, nil
}
