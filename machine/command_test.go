package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

type setIn struct {
	Count int `json:"count"`
}

type moveIn struct {
	Target string `json:"target"`
}

var errRefused = errors.New("refused")

func commandNodes(t *testing.T) (*node.Node, *node.Node) {
	cmds := []command.Command[counter]{
		command.New("set", "set the count", func(ctx *command.Context[counter], in setIn) (int, error) {
			err := ctx.Update(func(c *counter) { c.Count = in.Count })
			return ctx.State().Count, err
		}),
		command.New("move", "go to another node", func(ctx *command.Context[counter], in moveIn) (string, error) {
			ctx.TransitionTo(in.Target, nil)
			return "moving", nil
		}),
		command.New("fork", "spawn two helpers", func(ctx *command.Context[counter], _ empty) (string, error) {
			ctx.Spawn("helper", nil)
			ctx.Spawn("helper", nil)
			return "forked", nil
		}),
		command.New("hand_back", "cede to the parent", func(ctx *command.Context[counter], _ empty) (string, error) {
			ctx.Cede("handed back")
			return "ceding", nil
		}),
		command.New("refuse", "always fails", func(*command.Context[counter], empty) (string, error) {
			return "", errRefused
		}),
		command.New("crash", "panics", func(*command.Context[counter], empty) (string, error) {
			panic("oops")
		}),
	}
	desk := mustNode(t, "desk", node.Config[counter]{Commands: cmds, Validate: validCounter})
	helper := mustNode(t, "helper", node.Config[counter]{Worker: true, Commands: cmds})
	return desk, helper
}

func TestCommands(t *testing.T) {
	desk, helper := commandNodes(t)
	other := mustNode(t, "other", node.Config[empty]{})
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		return scripted.Text("ready"), nil
	})
	c := charter(t, model, desk, helper, other)

	t.Run("value and state", func(t *testing.T) {
		m := newMachine(t, c, "desk")
		steps := run(t, m, command.Invoke("set", setIn{5}))
		require.Len(t, steps, 1)
		require.Equal(t, machine.Command, steps[0].Reason)
		require.True(t, steps[0].Done)
		require.Equal(t, 5, steps[0].Command.Value)
		require.Equal(t, counter{Count: 5}, m.Root().State)
		h := m.History()
		require.Len(t, h, 1)
		require.Equal(t, message.Record, h[0].Role)
		require.JSONEq(t, `{"command":"set","input":{"count":5},"value":5}`, string(h[0].Parts[0].Data))
	})
	t.Run("transition", func(t *testing.T) {
		m := newMachine(t, c, "desk")
		calls := model.Calls()
		run(t, m, command.Invoke("move", moveIn{"other"}))
		require.Equal(t, "other", m.Root().Node)
		require.Equal(t, empty{}, m.Root().State)
		require.Equal(t, calls, model.Calls(), "a command's goto calls no model")
	})
	t.Run("spawn and cede by instance ID", func(t *testing.T) {
		m := newMachine(t, c, "desk")
		steps := run(t, m, command.Invoke("fork", nil))
		require.Equal(t, "forked", steps[0].Command.Value)
		kids := m.Root().Children
		require.Len(t, kids, 2)
		inv := command.Invocation{Name: "hand_back", InstanceID: kids[0].ID}
		run(t, m, inv)
		tree := m.Root()
		require.Len(t, tree.Children, 1)
		require.Equal(t, kids[1].ID, tree.Children[0].ID)
		last := m.History()[len(m.History())-2]
		require.Equal(t, "handed back", last.Text())
		require.Equal(t, tree.ID, last.Source.To)
	})
	errCases := []struct {
		name string
		inv  command.Invocation
		want error
	}{
		{"cede from root", command.Invoke("hand_back", nil), executor.ErrCedeFromRoot},
		{"unknown command", command.Invoke("nope", nil), command.ErrUnknownCommand},
		{"invalid input", command.Invoke("set", map[string]any{"count": "five"}), instance.ErrInvalidInput},
		{"input that is not JSON", command.Invoke("set", []byte("{")), instance.ErrInvalidInput},
		{"state that fails validation", command.Invoke("set", setIn{-1}), instance.ErrInvalidState},
		{"handler error", command.Invoke("refuse", nil), errRefused},
		{"handler panic", command.Invoke("crash", nil), instance.ErrPanic},
		{"transition to unknown node", command.Invoke("move", moveIn{"ghost"}), executor.ErrUnknownNode},
		{"unknown instance", command.Invocation{Name: "set", Input: setIn{1}, InstanceID: "ghost"}, command.ErrNoTarget},
	}
	for _, tt := range errCases {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, c, "desk")
			run(t, m, command.Invoke("set", setIn{2}))
			before := snap(m)
			_, err := collect(m.Run(context.Background(), tt.inv))
			require.ErrorIs(t, err, tt.want)
			requireUnchanged(t, before, m)
		})
	}
	t.Run("several commands are all or nothing", func(t *testing.T) {
		m := newMachine(t, c, "desk")
		before := snap(m)
		_, err := collect(m.Run(context.Background(), command.Invoke("set", setIn{3}), command.Invoke("refuse", nil)))
		require.ErrorIs(t, err, errRefused)
		requireUnchanged(t, before, m)
		steps := run(t, m, command.Invoke("set", setIn{3}), command.Invoke("set", setIn{4}))
		require.Len(t, steps, 2)
		require.False(t, steps[0].Done)
		require.True(t, steps[1].Done)
		require.Equal(t, counter{Count: 4}, m.Root().State)
	})
}

// TestCheckInvocation checks that a charter refuses the invocations no
// machine of it could run: a command none of its nodes or their packs
// declares, an input the command's schema refuses; and passes the rest.
func TestCheckInvocation(t *testing.T) {
	desk, _ := commandNodes(t)
	noted := mustNode(t, "noted", node.Config[empty]{Packs: []*node.Pack{notesPack()}})
	c := charter(t, scripted.Func(func(*llm.Request) (scripted.Reply, error) { return scripted.Text("ok"), nil }), desk, noted)
	for _, inv := range []command.Invocation{
		command.Invoke("set", setIn{Count: 3}),
		{Name: "set", Input: json.RawMessage(`{"count": 3}`)},
		{Name: "crash"},
		{Name: "clear_notes", Input: map[string]any{}},
		{Name: "set", Input: json.RawMessage(`{"count": 3}`), InstanceID: "not-checked"},
	} {
		require.NoError(t, c.CheckInvocation(inv), "%+v", inv)
	}
	for _, tc := range []struct {
		inv  command.Invocation
		want error
	}{
		{command.Invocation{Name: "nope"}, command.ErrUnknownCommand},
		{command.Invocation{Name: "remember"}, command.ErrUnknownCommand}, // a pack's tool, not a command
		{command.Invocation{Name: "set", Input: json.RawMessage(`{"count": "three"}`)}, instance.ErrInvalidInput},
		{command.Invocation{Name: "set", Input: json.RawMessage(`{"count": 3, "by": 1}`)}, instance.ErrInvalidInput},
		{command.Invocation{Name: "set", Input: json.RawMessage(`{"count":`)}, instance.ErrPayloadDecode},
	} {
		require.ErrorIs(t, c.CheckInvocation(tc.inv), tc.want, "%+v", tc.inv)
	}
}

// Charter.Commands lists every command once, by name, with the first
// declaring node's declaration (node name order), packs' commands too.
func TestCharterCommands(t *testing.T) {
	desk, helper := commandNodes(t)
	pack := node.NewPack("tickets", "tickets", empty{},
		node.PackCommand(command.New("close", "close the ticket", func(*command.Context[empty], setIn) (string, error) { return "", nil })))
	other := mustNode(t, "other", node.Config[empty]{Packs: []*node.Pack{pack}})
	c := charter(t, scripted.New(), helper, other, desk)
	var names []string
	for _, d := range c.Commands() {
		names = append(names, d.Name)
	}
	require.Equal(t, []string{"close", "crash", "fork", "hand_back", "move", "refuse", "set"}, names)
	require.Equal(t, "close the ticket", c.Commands()[0].Description)
	require.Contains(t, string(c.Commands()[0].InputSchema), `"count"`)
}
