package machine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// withoutIDs wraps model: its replies' tool uses come without IDs.
func withoutIDs(model llm.Model) llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		resp, err := model.Generate(ctx, req)
		if resp != nil {
			for i := range resp.Message.Parts {
				resp.Message.Parts[i].ID = ""
			}
		}
		return resp, err
	})
}

// A reply whose tool uses have missing or duplicate IDs is repaired before
// its tools run: the machine keeps working, across Marshal and Unmarshal.
func TestBadToolUseIDsCannotWedge(t *testing.T) {
	tally := node.NewTool("tally", "count one", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		return "counted", ctx.Update(func(c *counter) { c.Count++ })
	})
	n := mustNode(t, "n", node.Config[counter]{Tools: []node.Tool[counter]{tally}})
	script := func() *scripted.Model {
		return scripted.New(
			scripted.Tools(scripted.Call{ID: "dup", Name: "tally"}, scripted.Call{ID: "dup", Name: "tally"}),
			scripted.Text("counted twice"),
			scripted.Tool("tally", nil),
			scripted.Text("and once more"),
		)
	}
	tests := []struct {
		name  string
		model llm.Model
		ids   []string
	}{
		{"duplicate", script(), []string{"dup", "toolu_markov_id2_2"}},
		{"empty", withoutIDs(script()), []string{"toolu_markov_id2_1", "toolu_markov_id2_2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := charter(t, tt.model, n)
			m := newMachine(t, c, "n")
			run(t, m, machine.UserText("count twice"))
			require.Equal(t, counter{Count: 2}, m.Root().State)
			h := m.History()
			require.NoError(t, llm.CheckPairing(h[:len(h)-1]))
			var ids []string
			for _, u := range h[1].ToolUses() {
				ids = append(ids, u.ID)
			}
			require.Equal(t, tt.ids, ids)
			require.Equal(t, "counted twice", h[len(h)-1].Text())

			data, err := serialize.Marshal(m)
			require.NoError(t, err)
			back, err := serialize.Unmarshal(c, data)
			require.NoError(t, err)
			again, err := serialize.Marshal(back)
			require.NoError(t, err)
			require.Equal(t, data, again)

			run(t, back, machine.UserText("once more"))
			require.Equal(t, counter{Count: 3}, back.Root().State)
			require.Equal(t, "and once more", back.History()[len(back.History())-1].Text())
		})
	}
}

// Repaired tool-use IDs, and so the idempotency keys made of them, are
// each call's alone in the history, also when a window keeps every
// transcript the same length round after round.
func TestRepairedIDsDoNotRepeat(t *testing.T) {
	var keys []string
	tally := node.NewTool("tally", "count one", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		keys = append(keys, ctx.IdempotencyKey())
		return "counted", ctx.Update(func(c *counter) { c.Count++ })
	})
	n := mustNode(t, "n", node.Config[counter]{Tools: []node.Tool[counter]{tally}})
	model := withoutIDs(scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if req.Messages[len(req.Messages)-1].Role == message.User {
			return scripted.Tool("tally", nil), nil
		}
		return scripted.Text("counted"), nil
	}))
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Window: 2})
	m := newMachine(t, c, "n")
	for range 5 {
		run(t, m, machine.UserText("count"))
	}
	seen := map[string]bool{}
	for _, msg := range m.History() {
		for _, u := range msg.ToolUses() {
			require.False(t, seen[u.ID], "tool-use ID %s repeats", u.ID)
			seen[u.ID] = true
		}
	}
	require.Len(t, seen, 5)
	require.Len(t, keys, 5)
	for i, k := range keys {
		require.NotContains(t, keys[:i], k, "idempotency key %s repeats", k)
	}
}
