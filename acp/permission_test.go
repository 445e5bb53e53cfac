package acp_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/acp"
)

func TestYesNo(t *testing.T) {
	for _, tc := range []struct {
		schema string
		field  string
		ok     bool
	}{
		{`{"type":"boolean"}`, "", true},
		{`{"type":["boolean","null"]}`, "", true},
		{`{"type":"object","properties":{"approved":{"type":"boolean"},"manager":{"type":"string"}},"required":["approved","manager"]}`, "approved", true},
		{`{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"}}}`, "ok", true},
		{`{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"}},"required":["n"]}`, "", false},
		{`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"boolean"}}}`, "", false},
		{`{"type":"object","properties":{"text":{"type":"string"}}}`, "", false},
		{`{"type":"string"}`, "", false},
		{``, "", false},
		{`not json`, "", false},
	} {
		field, ok := acp.YesNo(json.RawMessage(tc.schema))
		require.Equal(t, tc.ok, ok, tc.schema)
		require.Equal(t, tc.field, field, tc.schema)
	}
}
