package durable_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// verdict is the payload the typed approval accepts.
type verdict struct {
	Approved bool `json:"approved"`
}

// typedRunner returns a runner whose "ask" tool takes a verdict on resume,
// and a machine "m1" suspended on it.
func typedRunner(t *testing.T, s store.Store) (*durable.Runner, string) {
	t.Helper()
	ask := node.NewTool("ask", "ask for approval", func(ctx *node.ToolContext[desk], _ empty) (string, error) {
		return "", ctx.Suspend("approval")
	}, node.ResumeWith[verdict]())
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{ask}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("ask", empty{}), scripted.Text("approved, thanks")),
		Nodes: []*node.Node{n},
	})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c})
	require.NoError(t, err)
	return r, suspended(t, r, "m1")
}

func TestTypedResumeRejectedChangesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r, id := typedRunner(t, s)
		call, err := r.Call(ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, `{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"],"additionalProperties":false}`,
			string(call.PayloadSchema))

		before, err := s.Load(ctx, "m1")
		require.NoError(t, err)
		_, err = drain(r.Resume(ctx, id, json.RawMessage(`{"approved":"yes"}`), false))
		var pe *instance.PayloadError
		require.ErrorAs(t, err, &pe)
		require.ErrorIs(t, err, instance.ErrPayloadDecode)
		require.Contains(t, pe.Violation, `want "boolean"`)
		after, err := s.Load(ctx, "m1")
		require.NoError(t, err)
		require.Equal(t, before, after, "the stored snapshot is byte-identical")
		sus, err := r.Suspension(ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, sus.Status)

		steps, err := drain(r.Resume(ctx, id, verdict{Approved: true}, false))
		require.NoError(t, err)
		require.Equal(t, machine.EndTurn, steps[len(steps)-1].Reason)
		_, err = r.Call(ctx, id)
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
		_, err = r.Call(ctx, "nope")
		require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
	})
}
