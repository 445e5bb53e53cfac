package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/node"
)

// TestSchema: a server's object schema is kept (without "$schema"); one
// markov cannot use is refused with ErrInvalidSchema.
func TestSchema(t *testing.T) {
	got, err := mcp.Schema(map[string]any{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"properties": map[string]any{"n": map[string]any{"type": "integer"}}})
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`, string(got))
	got, err = mcp.Schema(nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object"}`, string(got))

	for name, bad := range map[string]any{
		"not an object schema": map[string]any{"type": "string"},
		"no type":              map[string]any{"properties": map[string]any{}},
		"not an object":        []any{1},
		"does not compile":     map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": 5}}},
		"too large":            map[string]any{"type": "object", "description": strings.Repeat("d", mcp.MaxSchema)},
	} {
		_, err := mcp.Schema(bad)
		require.ErrorIs(t, err, mcp.ErrInvalidSchema, name)
	}
}

// FuzzSchema: no schema a server sends makes Schema panic, and one it
// accepts builds a markov tool.
func FuzzSchema(f *testing.F) {
	for _, s := range []string{`{"type":"object"}`, `{"type":"string"}`, `null`, `[]`, `{"type":"object","properties":{"a":{"$ref":"#/x"}}}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","required":["a"],"properties":{"a":{"enum":[1,"x"]}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			return
		}
		raw, err := mcp.Schema(v)
		if err != nil {
			require.ErrorIs(t, err, mcp.ErrInvalidSchema)
			return
		}
		tool := node.NewTool("t", "", func(*node.ToolContext[desk], json.RawMessage) (string, error) { return "", nil }, node.InputSchema(raw))
		if _, err := node.New("n", node.Config[desk]{Tools: []node.Tool[desk]{tool}}); err != nil {
			t.Fatalf("schema %s accepted but the tool does not build: %v", raw, err)
		}
	})
}
