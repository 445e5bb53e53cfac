package mcp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFormFor(t *testing.T) {
	for _, tc := range []struct {
		schema, content, payload string
	}{
		{``, `{"answer":"hi"}`, `"hi"`},
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"a":"x"}`, `{"a":"x"}`},
		{`{"type":"boolean"}`, `{"value":true}`, `true`},
		{`{"type":"object","properties":{"a":{"type":"array"}}}`, `{"json":"{\"a\":[1]}"}`, `{"a":[1]}`},
	} {
		var content map[string]any
		require.NoError(t, json.Unmarshal([]byte(tc.content), &content))
		p, err := formFor(json.RawMessage(tc.schema)).payload(content)
		require.NoError(t, err, tc.schema)
		require.JSONEq(t, tc.payload, string(p), tc.schema)
	}
	_, err := formFor(json.RawMessage(`{"type":"boolean"}`)).payload(map[string]any{})
	require.EqualError(t, err, "answer: the field value is missing")
	_, err = formFor(json.RawMessage(`{"type":"array"}`)).payload(map[string]any{"json": "[1"})
	require.EqualError(t, err, "answer: the field json is not JSON text")
}

// FuzzForm: any payload schema gives a form whose schema is a JSON
// object, and any answer a payload that is JSON or an error; no panic.
func FuzzForm(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"string"}}}`), []byte(`{"a":"x"}`))
	f.Add([]byte(`{"type":"integer"}`), []byte(`{"value":3}`))
	f.Add([]byte(`{"type":"array","items":{}}`), []byte(`{"json":"[1,2]"}`))
	f.Add([]byte(``), []byte(`{"answer":"free"}`))
	f.Add([]byte(`{"type":"object","properties":null}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, schema, content []byte) {
		fm := formFor(schema)
		var s map[string]any
		if err := json.Unmarshal(fm.schema, &s); err != nil || s["type"] != "object" {
			t.Fatalf("form schema %s of %q: not an object schema", fm.schema, schema)
		}
		var c map[string]any
		_ = json.Unmarshal(content, &c)
		p, err := fm.payload(c)
		if err == nil && !json.Valid(p) {
			t.Fatalf("payload %q is not JSON", p)
		}
	})
}
