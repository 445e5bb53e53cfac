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

// TestAskUserDurable: on SQLite, an ask-user question of each kind
// survives a restart, a bad answer from another process is refused with
// the call still pending, and the answer reaches the model.
func TestAskUserDurable(t *testing.T) {
	form := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}
	for _, tc := range []struct {
		in        node.AskInput
		bad, good any
		result    string
	}{
		{node.AskInput{Question: "Which order?"}, "", "42", "42"},
		{node.AskInput{Question: "Refund?", Kind: node.AskConfirm}, "yes", false, "false"},
		{node.AskInput{Question: "Which size?", Kind: node.AskChoice, Options: []string{"S", "M"}}, "XL", "M", "M"},
		{node.AskInput{Question: "Where?", Kind: node.AskForm, Schema: form}, map[string]any{}, map[string]any{"city": "Oslo"}, `{"city":"Oslo"}`},
	} {
		t.Run(tc.in.Question, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "ask.db")
			runner := func() *durable.Runner {
				n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{node.AskUser[desk](node.AskUserConfig{})}})
				require.NoError(t, err)
				model := scripted.New(scripted.Tool(node.AskUserTool, tc.in), scripted.Text("noted"))
				c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
				require.NoError(t, err)
				r, err := durable.New(durable.Config{Store: openSQLite(t, db), Charter: c})
				require.NoError(t, err)
				return r
			}
			ctx := context.Background()
			first := runner()
			_, err := first.Create(ctx, "m1", "desk", nil)
			require.NoError(t, err)
			steps, err := drain(first.Run(ctx, "m1", machine.UserText("help")))
			require.NoError(t, err)
			id := steps[len(steps)-1].Suspensions[0].SuspendID

			second := runner()
			_, err = runSteps(second.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: tc.bad}))
			var pe *instance.PayloadError
			require.ErrorAs(t, err, &pe)
			call, err := second.Call(ctx, id)
			require.NoError(t, err)
			require.Equal(t, instance.StatusPending, call.Status)

			_, err = runSteps(second.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: tc.good}))
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
			require.Equal(t, []string{tc.result}, results)
		})
	}
}
