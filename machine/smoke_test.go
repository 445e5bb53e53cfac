package machine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

type refundState struct {
	Approved []int `json:"approved"`
}

type refundIn struct {
	OrderID int `json:"order_id"`
}

func TestSmokeSuspendResume(t *testing.T) {
	tool := node.NewTool("request_refund", "refund an order", func(ctx *node.ToolContext[refundState], in refundIn) (string, error) {
		return "", ctx.Suspend("needs approval", instance.WithMetadata(in.OrderID))
	})
	n, err := node.New("support", node.Config[refundState]{Instructions: "help", Tools: []node.Tool[refundState]{tool}})
	require.NoError(t, err)
	model := scripted.New(scripted.Tool("request_refund", refundIn{42}), scripted.Text("refunded"))
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	m, err := c.NewMachine("support", nil)
	require.NoError(t, err)
	var steps []machine.Step
	for s, err := range m.Run(context.Background(), machine.UserText("refund 42")) {
		require.NoError(t, err)
		steps = append(steps, s)
	}
	require.Len(t, steps, 1)
	require.Equal(t, machine.Suspend, steps[0].Reason)
	require.True(t, steps[0].Done)
	require.Len(t, steps[0].Suspensions, 1)
	id := steps[0].Suspensions[0].SuspendID
	md, err := instance.Decode[int](steps[0].Suspensions[0].Metadata)
	require.NoError(t, err)
	require.Equal(t, 42, md)
	steps = nil
	for s, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: id, Payload: "approved"}) {
		require.NoError(t, err)
		steps = append(steps, s)
	}
	require.Len(t, steps, 1)
	require.Equal(t, machine.EndTurn, steps[0].Reason)
	h := m.History()
	require.Len(t, h, 4)
	require.Equal(t, "approved", h[2].Parts[0].Text)
	require.Equal(t, "refunded", h[3].Text())
	require.Empty(t, m.Pending())
	reqs := model.Requests()
	require.Len(t, reqs[1].Messages, 3)
}
