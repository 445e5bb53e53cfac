package machine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
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

type empty struct{}

type spawnArgs struct {
	Nodes []string `json:"nodes"`
}

// spawner spawns the named nodes.
func spawner[S any]() node.Transition[S] {
	return node.NewTransition("spawn", "spawn children", func(_ *node.TransitionContext[S], a spawnArgs) (instance.Effect, error) {
		var cs []instance.Child
		for _, n := range a.Nodes {
			cs = append(cs, instance.Child{Node: n})
		}
		return instance.Spawn(cs...), nil
	})
}

func echoTool[S any](name string) node.Tool[S] {
	type in struct {
		Text string `json:"text"`
	}
	return node.NewTool(name, "echo", func(_ *node.ToolContext[S], i in) (string, error) { return "echo " + i.Text, nil })
}

func TestSpawnWorkCedeAnswer(t *testing.T) {
	parent := mustNode(t, "parent", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty]()}})
	child := mustNode(t, "child", node.Config[empty]{Transitions: []node.Transition[empty]{node.Ceder[empty]("hand back")}})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"parent": {scripted.Tool("spawn", spawnArgs{Nodes: []string{"child"}}), scripted.Text("the answer is 42")},
		"child":  {scripted.Tool("cede", map[string]string{"content": "42"})},
	})
	m := newMachine(t, charter(t, model, parent, child), "parent")
	steps := run(t, m, machine.UserText("compute"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.Cede, machine.EndTurn}, reasons(steps))
	require.Equal(t, 3, model.Calls())
	require.True(t, steps[2].Done)
	require.Equal(t, "42", steps[1].CedeContent)
	root := m.Root()
	require.Empty(t, root.Children)
	// The parent saw the cede content as a message attributed to the child.
	reqs := model.Requests()
	last := reqs[2].Messages[len(reqs[2].Messages)-1]
	require.Equal(t, message.User, last.Role)
	require.Equal(t, "42", last.Text())
	require.Equal(t, "id2", last.Source.InstanceID)
	// The child saw the shared conversation only, not the parent's
	// unpaired spawn call.
	require.Len(t, reqs[1].Messages, 1)
	require.Equal(t, "compute", reqs[1].Messages[0].Text())
}

func TestCedeChainMaxSteps(t *testing.T) {
	a := mustNode(t, "a", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty]()}})
	b := mustNode(t, "b", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty](), node.Ceder[empty]("")}})
	c := mustNode(t, "c", node.Config[empty]{Transitions: []node.Transition[empty]{node.Ceder[empty]("")}})
	script := func() *scripted.Model {
		return scripted.ByNode(map[string][]scripted.Reply{
			"a": {scripted.Tool("spawn", spawnArgs{[]string{"b"}}), scripted.Text("done")},
			"b": {scripted.Tool("spawn", spawnArgs{[]string{"c"}}), scripted.Tool("cede", map[string]string{"content": "from b"})},
			"c": {scripted.Tool("cede", map[string]string{"content": "from c"})},
		})
	}
	tests := []struct {
		maxSteps int
		wantErr  error
		want     []machine.YieldReason
	}{
		{maxSteps: 5, want: []machine.YieldReason{machine.ToolUse, machine.ToolUse, machine.Cede, machine.Cede, machine.EndTurn}},
		{maxSteps: 4, wantErr: machine.ErrMaxSteps, want: []machine.YieldReason{machine.ToolUse, machine.ToolUse, machine.Cede, machine.Cede}},
	}
	for _, tt := range tests {
		ch := charterCfg(t, machine.CharterConfig{Model: script(), Nodes: []*node.Node{a, b, c}, MaxSteps: tt.maxSteps})
		m := newMachine(t, ch, "a")
		steps, err := collect(m.Run(context.Background(), machine.UserText("go")))
		require.ErrorIs(t, err, tt.wantErr)
		require.Equal(t, tt.want, reasons(steps))
	}
}

func TestWorkerAndPrimaryRounds(t *testing.T) {
	root := mustNode(t, "root", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty]()}})
	chat := mustNode(t, "chat", node.Config[empty]{Tools: []node.Tool[empty]{echoTool[empty]("echo")}})
	worker := mustNode(t, "worker", node.Config[empty]{
		Worker:      true,
		Tools:       []node.Tool[empty]{echoTool[empty]("fetch")},
		Transitions: []node.Transition[empty]{node.Ceder[empty]("")},
	})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"root":   {scripted.Tool("spawn", spawnArgs{[]string{"chat", "worker"}})},
		"chat":   {scripted.Tool("echo", map[string]string{"text": "a"}), scripted.Text("chatting")},
		"worker": {scripted.Tool("fetch", map[string]string{"text": "b"}), scripted.Tool("cede", map[string]string{"content": "fetched"})},
	})
	m := newMachine(t, charter(t, model, root, chat, worker), "root")
	steps := run(t, m, machine.UserText("start"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.ToolUse, machine.Cede}, reasons(steps))
	calls := map[string]int{}
	for _, r := range model.Requests() {
		calls[r.Node]++
	}
	require.Equal(t, map[string]int{"root": 1, "chat": 2, "worker": 2}, calls)
	tree := m.Root()
	require.Len(t, tree.Children, 1)
	require.Equal(t, "chat", tree.Children[0].Node)
	// The cede reached the root as a message scoped to it.
	h := m.History()
	var cede *message.Message
	for i := range h {
		if h[i].Source.To == tree.ID && h[i].Role == message.User {
			cede = &h[i]
		}
	}
	require.NotNil(t, cede)
	require.Equal(t, "fetched", cede.Text())
	// Neither leaf saw the other's tool exchanges.
	for _, r := range model.Requests() {
		for _, msg := range r.Messages {
			require.True(t, msg.Source.To == "" || msg.Source.To == r.InstanceID, "leaf %s saw %+v", r.InstanceID, msg.Source)
		}
	}
}

func TestSeveralCedesInOneRoundArriveInLeafOrder(t *testing.T) {
	root := mustNode(t, "root", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty]()}})
	w1 := mustNode(t, "w1", node.Config[empty]{Worker: true, Transitions: []node.Transition[empty]{node.Ceder[empty]("")}})
	w2 := mustNode(t, "w2", node.Config[empty]{Worker: true, Transitions: []node.Transition[empty]{node.Ceder[empty]("")}})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"root": {scripted.Tool("spawn", spawnArgs{[]string{"w1", "w2"}}), scripted.Text("both in")},
		"w1":   {{Calls: []scripted.Call{{Name: "cede", Input: map[string]string{"content": "one"}}}, Latency: 5e6}},
		"w2":   {scripted.Tool("cede", map[string]string{"content": "two"})},
	})
	m := newMachine(t, charter(t, model, root, w1, w2), "root")
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.Cede, machine.EndTurn}, reasons(steps))
	var got []string
	for _, msg := range steps[1].Messages {
		if msg.Role == message.User {
			got = append(got, msg.Text())
		}
	}
	require.Equal(t, []string{"one", "two"}, got)
	require.Len(t, steps[1].Cedes, 2)
	require.Equal(t, "w1", steps[1].Cedes[0].Node)
	require.Equal(t, "two", steps[1].Cedes[1].Content)
	require.Equal(t, m.Root().ID, steps[1].Cedes[1].To)
	// The root's next request holds both, in leaf order.
	reqs := model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	require.Equal(t, "one", msgs[len(msgs)-2].Text())
	require.Equal(t, "two", msgs[len(msgs)-1].Text())
}

func TestTwoNonWorkerLeavesIsAnError(t *testing.T) {
	root := mustNode(t, "root", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty]()}})
	chat := mustNode(t, "chat", node.Config[empty]{})
	model := scripted.New(scripted.Tool("spawn", spawnArgs{[]string{"chat", "chat"}}), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, root, chat), "root")
	run(t, m, machine.UserText("go"))
	res := lastToolResults(m.History())
	require.True(t, res[0].IsError)
	require.Contains(t, res[0].Text, executor.ErrPrimaryConflict.Error())
	require.Empty(t, m.Root().Children)

	// A tree that already breaks the rule fails the run.
	tree := m.Root()
	tree.Children = []*instance.Instance{{ID: "x", Node: "chat", State: empty{}}, {ID: "y", Node: "chat", State: empty{}}}
	bad, err := machine.Restore(m.Charter(), tree, message.History{})
	require.NoError(t, err)
	_, err = collect(bad.Run(context.Background(), machine.UserText("again")))
	require.ErrorIs(t, err, executor.ErrPrimaryConflict)
}

func TestSilentMessage(t *testing.T) {
	n := mustNode(t, "n", node.Config[empty]{})
	model := scripted.New(scripted.Text("hello"))
	m := newMachine(t, charter(t, model, n), "n")
	silent := machine.UserText("context only")
	silent.Silent = true
	steps := run(t, m, silent)
	require.Empty(t, steps)
	require.Equal(t, 0, model.Calls())
	require.Equal(t, 1, len(m.History()))
	run(t, m, machine.UserText("hi"))
	require.Equal(t, 1, model.Calls())
	require.Len(t, model.Requests()[0].Messages, 2)
}

type counter struct {
	Count int    `json:"count"`
	Label string `json:"label,omitempty"`
}

func validCounter(c counter) error {
	if c.Count < 0 {
		return errors.New("count must not be negative")
	}
	return nil
}

func TestUpdateStateTool(t *testing.T) {
	tests := []struct {
		name    string
		patch   string
		want    counter
		wantErr string
	}{
		{"valid", `{"patch":{"count":3,"label":"x"}}`, counter{Count: 3, Label: "x"}, ""},
		{"remove field", `{"patch":{"label":null}}`, counter{Count: 1}, ""},
		{"fails validation", `{"patch":{"count":-1}}`, counter{Count: 1, Label: "start"}, "count must not be negative"},
		{"unknown field", `{"patch":{"nope":1}}`, counter{Count: 1, Label: "start"}, "unknown field"},
		{"wrong type", `{"patch":{"count":"x"}}`, counter{Count: 1, Label: "start"}, "cannot unmarshal"},
		{"no patch", `{}`, counter{Count: 1, Label: "start"}, "patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := mustNode(t, "n", node.Config[counter]{Initial: counter{Count: 1, Label: "start"}, Validate: validCounter, StateTool: true})
			model := scripted.New(scripted.Tool(node.UpdateStateTool, tt.patch), scripted.Text("ok"))
			m := newMachine(t, charter(t, model, n), "n")
			run(t, m, machine.UserText("go"))
			require.Equal(t, tt.want, m.Root().State)
			res := lastToolResults(m.History())[0]
			if tt.wantErr == "" {
				require.False(t, res.IsError, res.Text)
			} else {
				require.True(t, res.IsError)
				require.Contains(t, res.Text, tt.wantErr)
			}
		})
	}
}

type budget struct {
	Limit int `json:"limit"`
}

type readIn struct {
	Write bool `json:"write"`
}

func TestAncestorToolIsReadOnly(t *testing.T) {
	readBudget := node.NewTool("read_budget", "read the budget", func(ctx *node.ToolContext[budget], in readIn) (int, error) {
		if in.Write {
			return 0, ctx.Update(func(b *budget) { b.Limit = 0 })
		}
		return ctx.State().Limit, nil
	})
	parent := mustNode(t, "parent", node.Config[budget]{
		Initial:     budget{Limit: 100},
		Tools:       []node.Tool[budget]{readBudget},
		Transitions: []node.Transition[budget]{spawner[budget]()},
	})
	child := mustNode(t, "child", node.Config[empty]{})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"parent": {scripted.Tool("spawn", spawnArgs{[]string{"child"}})},
		"child": {
			scripted.Tools(scripted.Call{Name: "read_budget", Input: readIn{}}, scripted.Call{Name: "read_budget", Input: readIn{Write: true}}),
			scripted.Text("budget is 100"),
		},
	})
	m := newMachine(t, charter(t, model, parent, child), "parent")
	run(t, m, machine.UserText("go"))
	res := lastToolResults(m.History())
	require.Equal(t, "100", res[0].Text)
	require.True(t, res[1].IsError)
	require.Contains(t, res[1].Text, instance.ErrReadOnly.Error())
	require.Equal(t, budget{Limit: 100}, m.Root().State)
	// The child's tool list holds the ancestor tool.
	var names []string
	for _, s := range model.Requests()[1].Tools {
		names = append(names, s.Name)
	}
	require.Contains(t, names, "read_budget")
}

type notes struct {
	Items []string `json:"items"`
}

type noteIn struct {
	Note string `json:"note"`
}

func notesPack() *node.Pack {
	remember := node.NewPackTool("remember", "remember a note", func(ctx *node.PackContext[notes], in noteIn) (string, error) {
		if err := ctx.Update(func(n *notes) { n.Items = append(n.Items, in.Note) }); err != nil {
			return "", err
		}
		return "noted", nil
	})
	clear := node.PackCommand(command.New("clear_notes", "forget all notes", func(ctx *command.Context[notes], _ empty) (int, error) {
		n := len(ctx.State().Items)
		return n, ctx.Update(func(s *notes) { s.Items = nil })
	}))
	return node.NewPack("memory", "notes kept across the conversation", notes{}, remember, clear)
}

func TestPackToolWritesPersist(t *testing.T) {
	p := notesPack()
	n := mustNode(t, "n", node.Config[empty]{Packs: []*node.Pack{p}, Transitions: []node.Transition[empty]{spawner[empty]()}})
	w := mustNode(t, "w", node.Config[empty]{Worker: true, Packs: []*node.Pack{p}, Transitions: []node.Transition[empty]{node.Ceder[empty]("")}})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"n": {
			scripted.Tool("remember", noteIn{"a"}),
			scripted.Tool("remember", noteIn{"b"}),
			scripted.Tool("spawn", spawnArgs{[]string{"w"}}),
			scripted.Text("done"),
		},
		"w": {scripted.Tool("remember", noteIn{"from worker"}), scripted.Tool("cede", map[string]string{"content": "x"})},
	})
	m := newMachine(t, charter(t, model, n, w), "n")
	run(t, m, machine.UserText("go"))
	require.Equal(t, notes{Items: []string{"a", "b"}}, m.Root().Packs["memory"])
	// The second call saw the first note in its prompt.
	require.Contains(t, model.Requests()[1].System, `{"items":["a"]}`)
	// The worker could not write.
	var workerResult message.Part
	for _, h := range m.History() {
		if h.Role == message.Tool && h.Source.Node == "w" {
			workerResult = h.Parts[0]
			break
		}
	}
	require.True(t, workerResult.IsError)
	require.Contains(t, workerResult.Text, instance.ErrReadOnly.Error())
	// The pack command clears the notes.
	steps := run(t, m, command.Invoke("clear_notes", nil))
	require.Len(t, steps, 1)
	require.Equal(t, 2, steps[0].Command.Value)
	require.Equal(t, notes{}, m.Root().Packs["memory"])
}

func TestCustomPromptBuilder(t *testing.T) {
	p := notesPack()
	parent := mustNode(t, "parent", node.Config[budget]{Initial: budget{Limit: 7}, Transitions: []node.Transition[budget]{spawner[budget]()}})
	child := mustNode(t, "child", node.Config[counter]{Initial: counter{Count: 2}, Instructions: "count things", Packs: []*node.Pack{p}})
	var got *executor.PromptContext
	builder := func(pc *executor.PromptContext) (string, error) {
		if pc.Node.Name() == "child" {
			cp := *pc
			got = &cp
		}
		return "custom prompt for " + pc.Node.Name(), nil
	}
	model := scripted.ByNode(map[string][]scripted.Reply{
		"parent": {scripted.Tool("spawn", spawnArgs{[]string{"child"}})},
		"child":  {scripted.Text("hi")},
	})
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{parent, child}, SystemPrompt: builder, Instructions: "be brief"})
	m := newMachine(t, c, "parent")
	run(t, m, machine.UserText("go"))
	require.NotNil(t, got)
	require.Equal(t, "be brief", got.Instructions)
	require.Equal(t, counter{Count: 2}, got.State)
	require.Len(t, got.Ancestors, 1)
	require.Equal(t, "parent", got.Ancestors[0].Node)
	require.Equal(t, budget{Limit: 7}, got.Ancestors[0].State)
	require.Equal(t, map[string]any{"memory": notes{}}, got.Packs)
	require.Equal(t, []*node.Pack{p}, got.Node.Packs())
	require.Equal(t, "custom prompt for child", model.Requests()[1].System)
}

func TestDefaultPrompt(t *testing.T) {
	review := mustNode(t, "review", node.Config[empty]{})
	n := mustNode(t, "draft", node.Config[counter]{
		Initial:      counter{Count: 5},
		Instructions: "Draft the reply.",
		Transitions:  []node.Transition[counter]{node.To[counter]("review", "send to review")},
	})
	model := scripted.New(scripted.Text("ok"))
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n, review}, Instructions: "You are helpful."})
	m := newMachine(t, c, "draft")
	run(t, m, machine.UserText("go"))
	sys := model.Requests()[0].System
	for _, want := range []string{"You are helpful.", "Draft the reply.", `{"count":5}`, "transition_to_review: send to review"} {
		require.Contains(t, sys, want)
	}
}

func TestToolFailuresBecomeErrorResults(t *testing.T) {
	type in struct {
		N int `json:"n"`
	}
	tools := []node.Tool[empty]{
		node.NewTool("fail", "", func(*node.ToolContext[empty], in) (string, error) { return "", errors.New("boom") }),
		node.NewTool("panic", "", func(*node.ToolContext[empty], in) (string, error) { panic("kaput") }),
		node.NewTool("typed", "", func(_ *node.ToolContext[empty], i in) (in, error) { return i, nil }),
	}
	n := mustNode(t, "n", node.Config[empty]{Tools: tools})
	model := scripted.New(scripted.Tools(
		scripted.Call{Name: "fail", Input: in{1}},
		scripted.Call{Name: "panic", Input: in{1}},
		scripted.Call{Name: "typed", Input: `{"n":"not a number"}`},
		scripted.Call{Name: "missing", Input: in{1}},
		scripted.Call{Name: "typed", Input: in{7}},
	), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, n), "n")
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.EndTurn}, reasons(steps))
	res := lastToolResults(m.History())
	require.Len(t, res, 5)
	for i, want := range []string{"boom", "kaput", "invalid input", `unknown tool "missing"`} {
		require.True(t, res[i].IsError, i)
		require.Contains(t, res[i].Text, want)
	}
	require.False(t, res[4].IsError)
	require.JSONEq(t, `{"n":7}`, res[4].Text)
	// Results answer the tool uses in order.
	uses := m.History()[1].ToolUses()
	for i := range uses {
		require.Equal(t, uses[i].ID, res[i].ID)
	}
}

type gotoArgs struct {
	Count int `json:"count"`
}

func TestTransitions(t *testing.T) {
	review := mustNode(t, "review", node.Config[counter]{Validate: validCounter})
	codeGoto := node.NewTransition("escalate", "", func(_ *node.TransitionContext[counter], a gotoArgs) (instance.Effect, error) {
		return instance.Goto("review", counter{Count: a.Count}), nil
	})
	toUnknown := node.NewTransition("nowhere", "", func(*node.TransitionContext[counter], empty) (instance.Effect, error) {
		return instance.Goto("ghost", nil), nil
	})
	draft := mustNode(t, "draft", node.Config[counter]{
		Initial:   counter{Count: 1},
		StateTool: true,
		Transitions: []node.Transition[counter]{
			node.To[counter]("review", ""), node.To[counter]("draft", "start over"), codeGoto, toUnknown,
			node.Ceder[counter](""),
		},
	})
	tests := []struct {
		name      string
		calls     []scripted.Call
		wantNode  string
		wantState counter
		wantErrs  []string // per call; "" means success
	}{
		{"declared edge", []scripted.Call{{Name: "transition_to_review", Input: `{"state":{"count":4}}`}}, "review", counter{Count: 4}, []string{""}},
		{"declared edge initial state", []scripted.Call{{Name: "transition_to_review"}}, "review", counter{}, []string{""}},
		{"self transition resets", []scripted.Call{{Name: node.UpdateStateTool, Input: `{"patch":{"count":9}}`}, {Name: "transition_to_draft"}}, "draft", counter{Count: 1}, []string{"", ""}},
		{"code transition", []scripted.Call{{Name: "escalate", Input: gotoArgs{3}}}, "review", counter{Count: 3}, []string{""}},
		{"second transition rejected", []scripted.Call{{Name: "escalate", Input: gotoArgs{3}}, {Name: "transition_to_review"}}, "review", counter{Count: 3}, []string{"", "only one transition"}},
		{"invalid target state", []scripted.Call{{Name: "escalate", Input: gotoArgs{-1}}}, "draft", counter{Count: 1}, []string{"count must not be negative"}},
		{"bad state JSON", []scripted.Call{{Name: "transition_to_review", Input: `{"state":{"count":"x"}}`}}, "draft", counter{Count: 1}, []string{"invalid state"}},
		{"unknown node", []scripted.Call{{Name: "nowhere"}}, "draft", counter{Count: 1}, []string{"unknown node"}},
		{"unknown transition", []scripted.Call{{Name: "transition_to_ghost"}}, "draft", counter{Count: 1}, []string{"unknown tool"}},
		{"cede from root", []scripted.Call{{Name: "cede", Input: map[string]string{"content": "x"}}}, "draft", counter{Count: 1}, []string{"root instance cannot cede"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := scripted.New(scripted.Tools(tt.calls...), scripted.Text("done"))
			m := newMachine(t, charter(t, model, draft, review), "draft")
			run(t, m, machine.UserText("go"))
			root := m.Root()
			require.Equal(t, tt.wantNode, root.Node)
			require.Equal(t, tt.wantState, root.State)
			res := lastToolResults(m.History())
			require.Len(t, res, len(tt.wantErrs))
			for i, want := range tt.wantErrs {
				if want == "" {
					require.False(t, res[i].IsError, res[i].Text)
				} else {
					require.True(t, res[i].IsError)
					require.Contains(t, res[i].Text, want)
				}
			}
			// After a goto the new node answers in the same run.
			require.Equal(t, tt.wantNode, model.Requests()[1].Node)
		})
	}
}

func TestCharterValidation(t *testing.T) {
	a := mustNode(t, "a", node.Config[empty]{Transitions: []node.Transition[empty]{node.To[empty]("ghost", "")}})
	_, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{a}})
	require.ErrorIs(t, err, machine.ErrInvalidCharter)
	require.ErrorContains(t, err, "ghost")

	clash := mustNode(t, "clash", node.Config[empty]{Tools: []node.Tool[empty]{echoTool[empty]("remember")}, Packs: []*node.Pack{notesPack()}})
	_, err = machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{clash}})
	require.ErrorIs(t, err, machine.ErrInvalidCharter)
	require.ErrorContains(t, err, "remember")

	ok := mustNode(t, "ok", node.Config[empty]{})
	_, err = machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{ok}, Tools: []node.Tool[any]{echoTool[any](node.UpdateStateTool)}})
	require.NoError(t, err, "ok has no state, so no update_state to clash with")
	withState := mustNode(t, "ws", node.Config[counter]{StateTool: true})
	_, err = machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{withState}, Tools: []node.Tool[any]{echoTool[any](node.UpdateStateTool)}})
	require.ErrorIs(t, err, machine.ErrInvalidCharter)

	_, err = machine.NewCharter(machine.CharterConfig{Nodes: []*node.Node{ok}})
	require.ErrorIs(t, err, machine.ErrInvalidCharter)

	_, err = node.New("bad name!", node.Config[empty]{})
	require.ErrorIs(t, err, node.ErrInvalidNode)
	_, err = node.New("n", node.Config[empty]{Tools: []node.Tool[empty]{echoTool[empty]("x"), echoTool[empty]("x")}})
	require.ErrorIs(t, err, node.ErrInvalidNode)
	_, err = node.New("n", node.Config[counter]{Initial: counter{Count: -1}, Validate: validCounter})
	require.ErrorIs(t, err, node.ErrInvalidNode)
	notObject := node.NewTool("s", "", func(*node.ToolContext[empty], string) (string, error) { return "", nil })
	_, err = node.New("n", node.Config[empty]{Tools: []node.Tool[empty]{notObject}})
	require.ErrorIs(t, err, node.ErrInvalidNode)
}

func TestGraph(t *testing.T) {
	a := mustNode(t, "draft", node.Config[empty]{Transitions: []node.Transition[empty]{node.To[empty]("review", "")}})
	b := mustNode(t, "review", node.Config[empty]{Transitions: []node.Transition[empty]{node.To[empty]("draft", ""), node.To[empty]("done", "")}})
	c := mustNode(t, "done", node.Config[empty]{})
	ch := charter(t, scripted.New(), a, b, c)
	g, err := ch.Graph(machine.GraphMermaid)
	require.NoError(t, err)
	for _, want := range []string{"stateDiagram", "draft --> review: transition_to_review", "review --> draft: transition_to_draft", "review --> done: transition_to_done"} {
		require.Contains(t, g, want)
	}
}

func TestMaxTokensRecoveryOnceThenDone(t *testing.T) {
	n := mustNode(t, "n", node.Config[empty]{Tools: []node.Tool[empty]{echoTool[empty]("echo")}})
	model := scripted.New(
		scripted.Reply{Text: "part one", Stop: llm.MaxTokens, Calls: []scripted.Call{{Name: "echo", Input: `{"text":`}}},
		scripted.Reply{Text: "part two", Stop: llm.MaxTokens},
	)
	m := newMachine(t, charter(t, model, n), "n")
	steps := run(t, m, machine.UserText("write a lot"))
	require.Equal(t, []machine.YieldReason{machine.MaxTokens, machine.MaxTokens}, reasons(steps))
	require.True(t, steps[1].Done)
	h := m.History()
	require.Len(t, h, 3)
	require.Empty(t, h[1].ToolUses(), "half-written tool uses are dropped")

	// One cut-off reply is recovered: the model continues.
	model = scripted.New(scripted.Reply{Text: "part one", Stop: llm.MaxTokens}, scripted.Text("the end"))
	m = newMachine(t, charter(t, model, n), "n")
	steps = run(t, m, machine.UserText("write"))
	require.Equal(t, []machine.YieldReason{machine.MaxTokens, machine.EndTurn}, reasons(steps))
}

func TestBreakAndContinue(t *testing.T) {
	n := mustNode(t, "n", node.Config[empty]{Tools: []node.Tool[empty]{echoTool[empty]("echo")}})
	model := scripted.New(scripted.Tool("echo", map[string]string{"text": "1"}), scripted.Tool("echo", map[string]string{"text": "2"}), scripted.Text("done"))
	m := newMachine(t, charter(t, model, n), "n")
	for s, err := range m.Run(context.Background(), machine.UserText("go")) {
		require.NoError(t, err)
		require.Equal(t, machine.ToolUse, s.Reason)
		break
	}
	require.Equal(t, 1, model.Calls())
	require.Equal(t, 3, len(m.History()))
	steps := run(t, m)
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.EndTurn}, reasons(steps))
	require.Equal(t, 3, model.Calls())
	// With nothing to do, Run ends at once.
	require.Empty(t, run(t, m))
}

func TestContextCancellation(t *testing.T) {
	n := mustNode(t, "n", node.Config[empty]{Tools: []node.Tool[empty]{echoTool[empty]("echo")}})
	ctx, cancel := context.WithCancel(context.Background())
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		cancel()
		return scripted.Reply{Text: "never seen", Latency: 1e9}, nil
	})
	m := newMachine(t, charter(t, model, n), "n")
	before := len(m.History())
	steps, err := collect(m.Run(ctx, machine.UserText("go")))
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, steps)
	require.Equal(t, before+1, len(m.History()), "the input is kept, the unfinished round is not")
}

func TestRunRejectsBadInputAndConcurrentRuns(t *testing.T) {
	n := mustNode(t, "n", node.Config[empty]{})
	m := newMachine(t, charter(t, scripted.New(scripted.Text("a")), n), "n")
	before := snap(m)
	_, err := collect(m.Run(context.Background(), machine.UserText("x"), 42))
	require.ErrorIs(t, err, machine.ErrBadInput)
	requireUnchanged(t, before, m)
	for range m.Run(context.Background(), machine.UserText("x")) {
		_, err := collect(m.Run(context.Background()))
		require.ErrorIs(t, err, machine.ErrRunning)
	}
}

func TestStructuredOutput(t *testing.T) {
	type verdict struct {
		Approve bool   `json:"approve"`
		Why     string `json:"why"`
	}
	n := mustNode(t, "n", node.Config[empty]{Output: node.Output[verdict]("verdict")})
	model := scripted.New(scripted.Text(`{"approve":true,"why":"fine"}`))
	m := newMachine(t, charter(t, model, n), "n")
	run(t, m, machine.UserText("judge"))
	require.NotNil(t, model.Requests()[0].Output)
	reply := m.History()[1]
	require.Len(t, reply.Parts, 2)
	require.Equal(t, message.KindStructured, reply.Parts[1].Kind)
	got, err := instance.Decode[verdict](reply.Parts[1].Data)
	require.NoError(t, err)
	require.Equal(t, verdict{true, "fine"}, got)
}

func TestStepsAreDeepCopies(t *testing.T) {
	n := mustNode(t, "n", node.Config[notes]{Initial: notes{Items: []string{"a"}}})
	m := newMachine(t, charter(t, scripted.New(scripted.Text("hi")), n), "n")
	steps := run(t, m, machine.UserText("go"))
	steps[0].Root.State.(notes).Items[0] = "mutated"
	steps[0].Messages[0].Parts[0].Text = "mutated"
	require.Equal(t, notes{Items: []string{"a"}}, m.Root().State)
	require.Equal(t, "hi", m.History()[1].Text())
	if d := cmp.Diff(m.Root(), m.Root()); d != "" {
		t.Fatal(d)
	}
	require.False(t, strings.Contains(m.History()[1].Text(), "mutated"))
}

func TestZeroToolsAreRejected(t *testing.T) {
	_, err := node.New("x", node.Config[empty]{Tools: []node.Tool[empty]{{}}})
	require.ErrorIs(t, err, node.ErrInvalidNode)
	_, err = node.New("x", node.Config[empty]{Transitions: []node.Transition[empty]{{}}})
	require.ErrorIs(t, err, node.ErrInvalidNode)
	p := node.NewPack[empty]("p", "", empty{}, node.PackTool[empty]{})
	require.ErrorIs(t, p.Err(), node.ErrInvalidNode)
	require.Empty(t, node.Tool[empty]{}.Name())
}

func TestConcurrentTools(t *testing.T) {
	// Both calls must be running at once to get past the barrier.
	var arrived sync.WaitGroup
	arrived.Add(2)
	fetch := node.NewTool("fetch", "", func(ctx *node.ToolContext[counter], in noteIn) (string, error) {
		arrived.Done()
		arrived.Wait()
		if err := ctx.Update(func(c *counter) { c.Count++ }); !errors.Is(err, instance.ErrReadOnly) {
			return "", errors.New("a concurrent tool must not write state")
		}
		return "fetched " + in.Note, nil
	}, node.Concurrent())
	n := mustNode(t, "n", node.Config[counter]{Tools: []node.Tool[counter]{fetch, addTool("add1", 1)}})
	model := scripted.New(scripted.Tools(
		scripted.Call{Name: "fetch", Input: noteIn{"a"}}, scripted.Call{Name: "add1"}, scripted.Call{Name: "fetch", Input: noteIn{"b"}},
	), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, n), "n")
	run(t, m, machine.UserText("go"))
	require.Equal(t, []string{"fetched a", "1", "fetched b"}, texts(lastToolResults(m.History())))
	require.Equal(t, counter{Count: 1}, m.Root().State)
}

func TestCharterTools(t *testing.T) {
	clock := node.NewTool("whoami", "the calling leaf", func(ctx *node.ToolContext[any], _ empty) (string, error) {
		if err := ctx.Update(func(*any) {}); !errors.Is(err, instance.ErrReadOnly) {
			return "", errors.New("charter tools are read-only")
		}
		c, _ := ctx.State().(counter)
		return ctx.InstanceID() + " at " + itoa(c.Count), nil
	})
	n := mustNode(t, "n", node.Config[counter]{Initial: counter{Count: 3}})
	model := scripted.New(scripted.Tool("whoami", nil), scripted.Text("ok"))
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Tools: []node.Tool[any]{clock}})
	m := newMachine(t, c, "n")
	run(t, m, machine.UserText("go"))
	require.Equal(t, m.Root().ID+" at 3", lastToolResults(m.History())[0].Text)
}

func TestRunSequenceIsSingleUse(t *testing.T) {
	model := scripted.New(scripted.Text("hello"), scripted.Text("again"))
	m := newMachine(t, charter(t, model, mustNode(t, "chat", node.Config[empty]{})), "chat")
	seq := m.Run(context.Background(), machine.UserText("hi"))
	_, err := collect(seq)
	require.NoError(t, err)
	before := snap(m)
	var errs []error
	for s, err := range seq {
		require.Equal(t, machine.Step{}, s)
		errs = append(errs, err)
	}
	require.Len(t, errs, 1, "one error, then the sequence ends")
	require.ErrorIs(t, errs[0], machine.ErrIterReused)
	requireUnchanged(t, before, m)
	require.Equal(t, 1, model.Calls())
	// A fresh Run still works.
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(run(t, m, machine.UserText("hi again"))))
}
