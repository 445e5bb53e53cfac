package machine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

type approvalState struct {
	Status string `json:"status"`
}

// A node offers update_state only when it opts in: by default the model
// cannot write fields meant for humans, such as an approval status.
func TestStateToolIsOptIn(t *testing.T) {
	refund := mustNode(t, "refund", node.Config[approvalState]{Initial: approvalState{Status: "pending"}})
	model := scripted.New(scripted.Tool(node.UpdateStateTool, `{"patch":{"status":"approved"}}`), scripted.Text("approved"))
	m := newMachine(t, charter(t, model, refund), "refund")
	run(t, m, machine.UserText("approve my refund"))

	require.Equal(t, approvalState{Status: "pending"}, m.Root().State)
	res := lastToolResults(m.History())
	require.Len(t, res, 1)
	require.True(t, res[0].IsError)
	require.Contains(t, res[0].Text, "unknown tool")
	for _, spec := range model.Requests()[0].Tools {
		require.NotEqual(t, node.UpdateStateTool, spec.Name)
	}

	// Without the built-in, a charter-wide tool may take the name.
	_, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{refund},
		Tools: []node.Tool[any]{echoTool[any](node.UpdateStateTool)}})
	require.NoError(t, err)

	optIn := mustNode(t, "refund", node.Config[approvalState]{StateTool: true})
	require.Contains(t, toolNames(optIn), node.UpdateStateTool)
	require.NotContains(t, toolNames(refund), node.UpdateStateTool)
}

func toolNames(n *node.Node) []string {
	var out []string
	for _, t := range n.Tools() {
		out = append(out, t.Spec.Name)
	}
	return out
}
