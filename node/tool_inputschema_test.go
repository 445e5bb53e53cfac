package node_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/node"
)

// TestInputSchema: a tool given its input schema shows it to the model;
// one that is not an object schema, or does not compile, fails the node.
func TestInputSchema(t *testing.T) {
	type s struct{}
	run := func(*node.ToolContext[s], json.RawMessage) (string, error) { return "", nil }
	good := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	n, err := node.New("n", node.Config[s]{Tools: []node.Tool[s]{node.NewTool("t", "", run, node.InputSchema(good))}})
	require.NoError(t, err)
	require.JSONEq(t, string(good), string(n.Tools()[0].Spec.InputSchema))
	for _, bad := range []string{`{"type":"string"}`, `{"type":"object","properties":{"n":{"type":7}}}`, `not json`} {
		_, err := node.New("n", node.Config[s]{Tools: []node.Tool[s]{node.NewTool("t", "", run, node.InputSchema(json.RawMessage(bad)))}})
		require.ErrorIs(t, err, node.ErrInvalidNode, bad)
	}
}
