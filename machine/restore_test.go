package machine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

func TestRestoreChecksTheTree(t *testing.T) {
	n := mustNode(t, "n", node.Config[counter]{Validate: validCounter, Packs: []*node.Pack{notesPack()}})
	c := charter(t, scripted.New(), n)
	ok := func() *instance.Instance { return &instance.Instance{ID: "r", Node: "n", State: counter{}} }
	tests := []struct {
		name string
		tree func() *instance.Instance
		want error
	}{
		{"nil root", func() *instance.Instance { return nil }, machine.ErrInvalidTree},
		{"unknown node", func() *instance.Instance { r := ok(); r.Node = "ghost"; return r }, executor.ErrUnknownNode},
		{"wrong state type", func() *instance.Instance { r := ok(); r.State = "text"; return r }, instance.ErrInvalidState},
		{"invalid state", func() *instance.Instance { r := ok(); r.State = counter{Count: -1}; return r }, instance.ErrInvalidState},
		{"duplicate IDs", func() *instance.Instance {
			r := ok()
			r.Children = []*instance.Instance{{ID: "r", Node: "n", State: counter{}}}
			return r
		}, machine.ErrInvalidTree},
		{"nil child", func() *instance.Instance { r := ok(); r.Children = []*instance.Instance{nil}; return r }, machine.ErrInvalidTree},
		{"packs below the root", func() *instance.Instance {
			r := ok()
			r.Children = []*instance.Instance{{ID: "c", Node: "n", State: counter{}, Packs: map[string]any{}}}
			return r
		}, machine.ErrInvalidTree},
		{"unknown pack", func() *instance.Instance { r := ok(); r.Packs = map[string]any{"ghost": 1}; return r }, machine.ErrInvalidTree},
		{"pack state of the wrong type", func() *instance.Instance { r := ok(); r.Packs = map[string]any{"memory": 1}; return r }, instance.ErrInvalidState},
		{"duplicate suspend IDs", func() *instance.Instance {
			r := ok()
			call := instance.SuspendedCall{SuspendID: "s", Status: instance.StatusPending, Kind: instance.KindInstance}
			r.Suspension = &instance.SuspensionState{Calls: []instance.SuspendedCall{call, call}}
			return r
		}, machine.ErrInvalidTree},
		{"bad status", func() *instance.Instance {
			r := ok()
			r.Suspension = &instance.SuspensionState{Calls: []instance.SuspendedCall{{SuspendID: "s", Status: "weird"}}}
			return r
		}, machine.ErrInvalidTree},
		{"held reply without its slots", func() *instance.Instance {
			r := ok()
			r.Suspension = &instance.SuspensionState{
				Calls: []instance.SuspendedCall{{SuspendID: "s", Status: instance.StatusPending, Kind: instance.KindTool, ToolUseID: "u"}},
				Reply: &instance.HeldReply{Message: message.Message{Parts: []message.Part{message.ToolUse("u", "x", nil)}}},
			}
			return r
		}, machine.ErrInvalidTree},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := machine.Restore(c, tt.tree(), message.History{})
			require.ErrorIs(t, err, tt.want)
		})
	}
	m, err := machine.Restore(c, ok(), message.NewHistory([]message.Message{message.UserText("hi")}))
	require.NoError(t, err)
	require.Equal(t, notes{}, m.Root().Packs["memory"], "missing pack states start at their initial value")
	require.Equal(t, 1, len(m.History()))
}
