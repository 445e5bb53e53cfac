package durable_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// TestAskUserDurable: on SQLite, an ask-user question survives a restart,
// a bad answer from another process is refused with the call still
// pending, and the answer reaches the model.
func TestAskUserDurable(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ask.db")
	desk := func() *durable.Runner {
		n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{node.AskUser[desk](node.AskUserConfig{})}})
		require.NoError(t, err)
		model := scripted.New(scripted.Tool(node.AskUserTool, node.AskInput{Question: "Which size?", Kind: node.AskChoice, Options: []string{"S", "M"}}), scripted.Text("noted"))
		c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
		require.NoError(t, err)
		r, err := durable.New(durable.Config{Store: openSQLite(t, db), Charter: c})
		require.NoError(t, err)
		return r
	}
	ctx := context.Background()
	first := desk()
	_, err := first.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	steps, err := drain(first.Run(ctx, "m1", machine.UserText("order a shirt")))
	require.NoError(t, err)
	id := steps[len(steps)-1].Suspensions[0].SuspendID

	second := desk()
	_, err = drain(second.ResumeWith(ctx, machine.ResumeInput{SuspendID: id, Payload: "XL"}))
	var pe *instance.PayloadError
	require.ErrorAs(t, err, &pe)
	call, err := second.Call(ctx, id)
	require.NoError(t, err)
	require.Equal(t, instance.StatusPending, call.Status)

	_, err = drain(second.ResumeWith(ctx, machine.ResumeInput{SuspendID: id, Payload: "M"}))
	require.NoError(t, err)
	m, _, err := second.Load(ctx, "m1")
	require.NoError(t, err)
	var results []string
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.Kind == message.KindToolResult {
				results = append(results, p.Text)
			}
		}
	}
	require.Equal(t, []string{"M"}, results)
}
