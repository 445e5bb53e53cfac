package machine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// TestAskUser: the ask-user tool suspends with a payload schema built
// from the question; an answer the schema rejects is refused and the call
// stays pending; a good one is the tool's result.
func TestAskUser(t *testing.T) {
	form := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []string{"city"}, "additionalProperties": false}
	cases := []struct {
		name     string
		in       node.AskInput
		bad      any
		good     any
		result   string
		metadata string
	}{
		{"text", node.AskInput{Question: "Which order?"}, "", "order 42", "order 42",
			`{"question":"Which order?","kind":"text"}`},
		{"confirm", node.AskInput{Question: "Refund it?", Kind: node.AskConfirm}, "yes", true, "true",
			`{"question":"Refund it?","kind":"confirm"}`},
		{"choice", node.AskInput{Question: "Which size?", Kind: node.AskChoice, Options: []string{"S", "M", "L"}}, "XL", "M", "M",
			`{"question":"Which size?","kind":"choice","options":["S","M","L"]}`},
		{"form", node.AskInput{Question: "Where to?", Kind: node.AskForm, Schema: form}, map[string]any{"town": "Oslo"},
			map[string]any{"city": "Oslo"}, `{"city":"Oslo"}`, `{"question":"Where to?","kind":"form"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{node.AskUser[counter](node.AskUserConfig{})}})
			model := scripted.New(scripted.Tool(node.AskUserTool, tc.in), scripted.Text("thanks"))
			m := newMachine(t, charter(t, model, desk), "desk")
			run(t, m, machine.UserText("help me"))
			pending := m.Pending()
			require.Len(t, pending, 1)
			require.Equal(t, tc.in.Question, pending[0].Reason)
			require.JSONEq(t, tc.metadata, string(pending[0].Metadata))
			require.NotEmpty(t, pending[0].PayloadSchema)

			before := marshal(t, m)
			_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: pending[0].SuspendID, Payload: tc.bad}))
			var pe *instance.PayloadError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, before, marshal(t, m), "a refused answer changes nothing")

			run(t, m, machine.ResumeInput{SuspendID: pending[0].SuspendID, Payload: tc.good})
			require.Empty(t, m.Pending())
			require.Equal(t, tc.result, toolResult(m.History()))
		})
	}
}

// toolResult is the text of the last tool result of h.
func toolResult(h []message.Message) string {
	for i := len(h) - 1; i >= 0; i-- {
		for _, p := range h[i].Parts {
			if p.Kind == message.KindToolResult {
				return p.Text
			}
		}
	}
	return ""
}

// TestAskUserRefusesBadQuestions: a question the tool cannot ask is an
// error result the model sees, and nothing suspends.
func TestAskUserRefusesBadQuestions(t *testing.T) {
	for name, in := range map[string]node.AskInput{
		"no question":   {Kind: node.AskConfirm},
		"one option":    {Question: "?", Kind: node.AskChoice, Options: []string{"only"}},
		"repeated":      {Question: "?", Kind: node.AskChoice, Options: []string{"a", "a"}},
		"not an object": {Question: "?", Kind: node.AskForm, Schema: map[string]any{"type": "string"}},
		"bad schema":    {Question: "?", Kind: node.AskForm, Schema: map[string]any{"type": "object", "properties": 7}},
		"unknown kind":  {Question: "?", Kind: "essay"},
	} {
		t.Run(name, func(t *testing.T) {
			desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{node.AskUser[counter](node.AskUserConfig{})}})
			m := newMachine(t, charter(t, scripted.New(scripted.Tool(node.AskUserTool, in), scripted.Text("ok")), desk), "desk")
			steps := run(t, m, machine.UserText("go"))
			require.Empty(t, m.Pending())
			require.True(t, steps[len(steps)-1].Done)
			var isError bool
			for _, p := range m.History()[2].Parts {
				isError = isError || (p.Kind == message.KindToolResult && p.IsError)
			}
			require.True(t, isError, "an error result: %v", m.History()[2])
		})
	}
}

// TestAskUserTimeout: at the deadline the call resolves with a text saying
// nobody answered, and the model goes on.
func TestAskUserTimeout(t *testing.T) {
	clock := newClock()
	desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{node.AskUser[counter](node.AskUserConfig{Timeout: time.Hour})}})
	model := scripted.New(scripted.Tool(node.AskUserTool, node.AskInput{Question: "Refund it?", Kind: node.AskConfirm}), scripted.Text("I will ask again later"))
	m := newMachine(t, charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}, Clock: clock.Now}), "desk")
	run(t, m, machine.UserText("go"))
	require.Len(t, m.Pending(), 1)
	clock.Advance(2 * time.Hour)
	run(t, m)
	require.Empty(t, m.Pending())
	require.Contains(t, toolResult(m.History()), "Refund it?")
}
