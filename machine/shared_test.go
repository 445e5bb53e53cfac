package machine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// books is data two nodes share: filed expenses and what was decided.
type books struct {
	Filed    []string `json:"filed"`
	Approved []string `json:"approved"`
}

type fileIn struct {
	Item string `json:"item"`
}

// booksPack is a pack whose "file" tool records an item and whose
// "approve" tool waits for a manager, then records the decision; both
// nodes of sharedCharter opt into it.
func booksPack() *node.Pack {
	file := node.NewPackTool("file", "file an expense", func(ctx *node.PackContext[books], in fileIn) (string, error) {
		return "filed", ctx.Update(func(b *books) { b.Filed = append(b.Filed, in.Item) })
	})
	approve := node.NewPackTool("approve", "ask a manager", func(ctx *node.PackContext[books], in fileIn) (string, error) {
		return "", ctx.Suspend("approve " + in.Item)
	}, node.OnPackResume(func(ctx *node.PackContext[books], in fileIn, r node.Resumed[decision]) (string, error) {
		if !r.Payload.Approved {
			return "declined", nil
		}
		return "approved", ctx.Update(func(b *books) { b.Approved = append(b.Approved, in.Item) })
	}))
	return node.NewPack("books", "the expense books", books{}, file, approve)
}

// TestPackStateSurvivesTransitions: a pack's state, shared by the nodes
// that opt in, is untouched by transitions between them, and a pack tool
// suspends and resumes (with a typed handler) like a node's.
func TestPackStateSurvivesTransitions(t *testing.T) {
	pack := booksPack()
	intake := mustNode(t, "intake", node.Config[counter]{Packs: []*node.Pack{pack},
		Transitions: []node.Transition[counter]{node.To[counter]("large", "")}})
	large := mustNode(t, "large", node.Config[empty]{Packs: []*node.Pack{pack},
		Transitions: []node.Transition[empty]{node.To[empty]("intake", "")}})
	model := scripted.New(
		scripted.Tool("file", fileIn{"taxi"}),
		scripted.Tool(node.TransitionPrefix+"large", map[string]any{}),
		scripted.Tool("approve", fileIn{"server"}),
		scripted.Tool(node.TransitionPrefix+"intake", map[string]any{}),
		scripted.Text("done"),
	)
	c := charter(t, model, intake, large)
	m := newMachine(t, c, "intake")
	ids := pendingIDs(run(t, m, machine.UserText("file a taxi, then a server")))
	require.Len(t, ids, 1)
	require.Equal(t, "large", m.Root().Node)
	require.JSONEq(t, decisionSchema, string(m.Pending()[0].PayloadSchema), "OnPackResume declares the payload type")

	// The approval comes in another process.
	m, err := serialize.Unmarshal(c, marshal(t, m))
	require.NoError(t, err)
	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: decision{Approved: true}})
	require.Equal(t, "intake", m.Root().Node)
	require.Equal(t, books{Filed: []string{"taxi"}, Approved: []string{"server"}}, m.Root().Packs["books"])
}

// TestToWithCarriesState: a ToWith edge hands the target the state carry
// makes of the instance's, there and back; the charter refuses an edge
// whose carried type is not the target's state.
func TestToWithCarriesState(t *testing.T) {
	type escalated struct {
		Count  int  `json:"count"`
		Urgent bool `json:"urgent"`
	}
	desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{addTool("add1", 1)},
		Transitions: []node.Transition[counter]{node.ToWith("senior", "escalate", func(c counter) escalated {
			return escalated{Count: c.Count, Urgent: true}
		})}})
	senior := mustNode(t, "senior", node.Config[escalated]{
		Transitions: []node.Transition[escalated]{node.ToWith("desk", "hand back", func(e escalated) counter {
			return counter{Count: e.Count + 100}
		})}})
	model := scripted.New(
		scripted.Tool("add1", empty{}),
		scripted.Tool(node.TransitionPrefix+"senior", map[string]any{}),
		scripted.Tool(node.TransitionPrefix+"desk", map[string]any{}),
		scripted.Text("done"),
	)
	m := newMachine(t, charter(t, model, desk, senior), "desk")
	var states []any
	for step, err := range m.Run(context.Background(), machine.UserText("go")) {
		require.NoError(t, err)
		states = append(states, step.Root.State)
	}
	require.Equal(t, []any{counter{Count: 1}, escalated{Count: 1, Urgent: true}, counter{Count: 101}, counter{Count: 101}}, states)

	wrong := mustNode(t, "wrong", node.Config[counter]{
		Transitions: []node.Transition[counter]{node.ToWith("senior", "", func(c counter) counter { return c })}})
	_, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{wrong, senior, desk}})
	require.ErrorIs(t, err, machine.ErrInvalidCharter)
	require.ErrorContains(t, err, "carries a machine_test.counter")
}

// TestCommandTransitionWhilePending: a command may not move an instance
// away from calls still pending on it (they belong to its node): the
// command fails with ErrCallsPending and changes nothing; one that
// resolves them first moves it.
func TestCommandTransitionWhilePending(t *testing.T) {
	type moveIn struct {
		Resolve string `json:"resolve,omitempty"`
	}
	move := command.New("move", "move to done", func(ctx *command.Context[counter], in moveIn) (string, error) {
		if in.Resolve != "" {
			if err := ctx.Resume(in.Resolve, "withdrawn"); err != nil {
				return "", err
			}
		}
		ctx.TransitionTo("done", nil)
		return "moved", nil
	})
	desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{askTool[counter]("ask")},
		Commands: []command.Command[counter]{move}})
	model := scripted.New(scripted.Tool("ask", askIn{"refund"}), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, desk, doneNode(t)), "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	require.Len(t, ids, 1)

	before := marshal(t, m)
	_, err := collect(m.Run(context.Background(), command.Invoke("move", moveIn{})))
	require.ErrorIs(t, err, machine.ErrCallsPending)
	require.Equal(t, before, marshal(t, m))

	run(t, m, command.Invoke("move", moveIn{Resolve: ids[0]}))
	require.Equal(t, "done", m.Root().Node)
	require.Empty(t, m.Pending())
}

// TestEffectNameTwice: a second effect of one name in one call is refused
// (the journal tells effects apart by name), and the first ran.
func TestEffectNameTwice(t *testing.T) {
	ran := 0
	twice := node.NewTool("twice", "charge twice", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		for range 2 {
			if _, err := node.Effect(ctx, "charge", func(context.Context) (int, error) { ran++; return ran, nil }, node.EffectConfig[int]{}); err != nil {
				return "", err
			}
		}
		return "charged twice", nil
	})
	desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{twice}})
	m := newMachine(t, charter(t, scripted.New(scripted.Tool("twice", empty{}), scripted.Text("ok")), desk), "desk")
	run(t, m, machine.UserText("go"))
	require.Equal(t, 1, ran)
	require.Contains(t, toolResult(m.History()), instance.ErrDuplicateEffect.Error())
}
