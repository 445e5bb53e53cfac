package durable_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// TestChosenSuspendIDClash: a suspend ID a tool chooses (instance.WithID)
// that another machine of the store holds fails the call when it is asked
// for — the model sees an error result naming the ID and the run goes on
// and is saved — instead of failing the save after the run.
func TestChosenSuspendIDClash(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		type holdIn struct {
			ID string `json:"id"`
		}
		hold := node.NewTool("hold", "hold an order", func(ctx *node.ToolContext[desk], in holdIn) (string, error) {
			return "", ctx.Suspend("hold "+in.ID, instance.WithID(in.ID))
		})
		n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{hold}})
		require.NoError(t, err)
		model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
			if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
				return scripted.Text("noted: " + last.Parts[0].Text), nil
			}
			return scripted.Tool("hold", holdIn{"order-42"}), nil
		})
		c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
		require.NoError(t, err)
		r, err := durable.New(durable.Config{Store: s, Charter: c})
		require.NoError(t, err)
		ctx := context.Background()
		for _, id := range []string{"a", "b"} {
			_, err := r.Create(ctx, id, "desk", nil)
			require.NoError(t, err)
		}

		steps, err := drain(r.Run(ctx, "a", machine.UserText("hold order 42")))
		require.NoError(t, err)
		require.True(t, steps[len(steps)-1].NeedsResume())
		require.Equal(t, "order-42", steps[len(steps)-1].Suspensions[0].SuspendID)

		steps, err = drain(r.Run(ctx, "b", machine.UserText("hold order 42")))
		require.NoError(t, err, "the clash fails the call, not the run")
		last := steps[len(steps)-1]
		require.False(t, last.NeedsResume())
		require.Contains(t, last.Messages[len(last.Messages)-1].Text(), `suspend ID "order-42"`)
		require.Contains(t, last.Messages[len(last.Messages)-1].Text(), executor.ErrDuplicateID.Error())
		st, err := r.Status(ctx, "b")
		require.NoError(t, err)
		require.Empty(t, st.Pending)
		found, err := r.Suspension(ctx, "order-42")
		require.NoError(t, err)
		require.Equal(t, "a", found.MachineID, "machine a keeps its suspension")
	})
}
