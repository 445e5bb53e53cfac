package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

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
	"github.com/markov-agents/markov/serialize"
)

type approval struct {
	OK bool   `json:"ok"`
	By string `json:"by"`
}

type askIn struct {
	What string `json:"what"`
}

// askTool suspends every call, naming what it asks for.
func askTool[S any](name string, opts ...node.ToolOption) node.Tool[S] {
	return node.NewTool(name, "ask a human", func(ctx *node.ToolContext[S], in askIn) (string, error) {
		return "", ctx.Suspend("asking about "+in.What, instance.WithMetadata(map[string]string{"what": in.What}))
	}, opts...)
}

func addTool(name string, n int) node.Tool[counter] {
	return node.NewTool(name, "add to the count", func(ctx *node.ToolContext[counter], _ empty) (int, error) {
		err := ctx.Update(func(c *counter) { c.Count += n })
		return ctx.State().Count, err
	})
}

// suspendNode is a node with counting tools, asking tools and transitions.
func suspendNode(t *testing.T, extra ...node.Tool[counter]) *node.Node {
	tools := append([]node.Tool[counter]{addTool("add1", 1), addTool("add10", 10), askTool[counter]("ask"), askTool[counter]("ask2")}, extra...)
	return mustNode(t, "desk", node.Config[counter]{
		Tools:       tools,
		Transitions: []node.Transition[counter]{node.To[counter]("done", "")},
	})
}

func doneNode(t *testing.T) *node.Node { return mustNode(t, "done", node.Config[empty]{}) }

// deskMachine is a machine at node desk of a charter with the desk (its
// ask tools suspend) and done nodes, driven by model.
func deskMachine(t *testing.T, model llm.Model) *machine.Machine {
	return newMachine(t, charter(t, model, suspendNode(t), doneNode(t)), "desk")
}

// parkedDesk runs a desk machine (deskMachine) on "go" and returns it with
// the suspend IDs its run left pending.
func parkedDesk(t *testing.T, model llm.Model) (*machine.Machine, []string) {
	m := deskMachine(t, model)
	return m, pendingIDs(run(t, m, machine.UserText("go")))
}

func pendingIDs(steps []machine.Step) []string {
	last := steps[len(steps)-1]
	var out []string
	for _, c := range last.Suspensions {
		out = append(out, c.SuspendID)
	}
	return out
}

func TestSingleSuspendResume(t *testing.T) {
	model := scripted.New(scripted.Tool("ask", askIn{"refund"}), scripted.Text("refund approved"))
	m := deskMachine(t, model)
	steps := run(t, m, machine.UserText("refund order 42"))
	require.Equal(t, []machine.YieldReason{machine.Suspend}, reasons(steps))
	s := steps[0]
	require.True(t, s.Done)
	require.Len(t, s.Suspensions, 1)
	call := s.Suspensions[0]
	require.Equal(t, instance.KindTool, call.Kind)
	require.Equal(t, "ask", call.Name)
	require.Equal(t, "asking about refund", call.Reason)
	require.Equal(t, instance.StatusPending, call.Status)
	require.NotEmpty(t, call.ToolUseID)
	in, err := instance.Decode[askIn](call.Input)
	require.NoError(t, err)
	require.Equal(t, askIn{"refund"}, in)
	require.Len(t, s.Events, 1)
	require.Equal(t, instance.EventSuspended, s.Events[0].Type)
	require.Equal(t, instance.ByTool, s.Events[0].Initiator)
	require.True(t, s.Root.Suspended())
	require.True(t, s.NeedsResume())
	require.Len(t, s.Held, 1)
	require.Equal(t, call.ToolUseID, s.Held[0].ToolUses()[0].ID)
	// History holds no unanswered tool use while suspended.
	require.Equal(t, 1, len(m.History()))

	steps = run(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: approval{OK: true, By: "ann"}})
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	require.True(t, steps[0].Done)
	require.Empty(t, m.Pending())
	require.False(t, m.Root().Suspended())
	require.Nil(t, m.Root().Suspension)
	req := model.Requests()[1]
	require.Len(t, req.Messages, 3)
	res := req.Messages[2].Parts[0]
	require.Equal(t, call.ToolUseID, res.ID)
	require.JSONEq(t, `{"ok":true,"by":"ann"}`, res.Text)
	require.False(t, res.IsError)
	require.Equal(t, call.SuspendID, res.SuspendID)
	ev := steps[0].Events[0]
	require.Equal(t, instance.EventResumed, ev.Type)
	require.Equal(t, instance.CauseExplicit, ev.Cause)
	require.True(t, ev.HadPayload)
}

func TestOneOfThreeSuspends(t *testing.T) {
	model := scripted.New(scripted.Tools(
		scripted.Call{Name: "add1"}, scripted.Call{Name: "ask", Input: askIn{"x"}}, scripted.Call{Name: "add10"},
	), scripted.Text("ok"))
	m := deskMachine(t, model)
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, machine.Suspend, steps[0].Reason)
	// Siblings ran in order and their updates applied at once.
	require.Equal(t, counter{Count: 11}, m.Root().State)
	held := m.Root().Suspension.Reply
	require.Equal(t, []string{"1", "", "11"}, texts(held.Results))
	run(t, m, machine.ResumeInput{SuspendID: pendingIDs(steps)[0], Payload: "yes"})
	res := lastToolResults(model.Requests()[1].Messages)
	require.Equal(t, []string{"1", "yes", "11"}, texts(res))
}

func TestPartialResumeAndOrder(t *testing.T) {
	script := func() *scripted.Model {
		return scripted.New(scripted.Tools(
			scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "add1"}, scripted.Call{Name: "ask2", Input: askIn{"b"}},
		), scripted.Text("ok"))
	}
	finalInput := func(order []int) []message.Message {
		model := script()
		m, ids := parkedDesk(t, model)
		require.Len(t, ids, 2)
		payloads := []string{"first", "second"}
		steps := run(t, m, machine.ResumeInput{SuspendID: ids[order[0]], Payload: payloads[order[0]]})
		// Partial resume: no model call, the rest still pending.
		require.Equal(t, []machine.YieldReason{machine.AwaitingResume}, reasons(steps))
		require.Len(t, steps[0].Suspensions, 1)
		require.Equal(t, ids[order[1]], steps[0].Suspensions[0].SuspendID)
		require.Equal(t, 1, model.Calls())
		require.True(t, m.Root().Suspended())
		steps = run(t, m, machine.ResumeInput{SuspendID: ids[order[1]], Payload: payloads[order[1]]})
		require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
		require.Equal(t, 2, model.Calls())
		return model.Requests()[1].Messages
	}
	inOrder := finalInput([]int{0, 1})
	require.Equal(t, []string{"first", "1", "second"}, texts(lastToolResults(inOrder)))
	if d := cmp.Diff(inOrder, finalInput([]int{1, 0})); d != "" {
		t.Fatalf("resume order changed the model input:\n%s", d)
	}
}

func TestResumeErrorsChangeNothing(t *testing.T) {
	model := scripted.New(scripted.Tools(scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "ask2", Input: askIn{"b"}}), scripted.Text("ok"))
	m := deskMachine(t, model)

	// Nothing is suspended yet.
	_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: "nope"}))
	require.ErrorIs(t, err, instance.ErrNotSuspended)
	require.ErrorIs(t, err, instance.ErrUnknownSuspendID)

	ids := pendingIDs(run(t, m, machine.UserText("go")))
	require.NoError(t, func() error {
		_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: ids[0], Payload: "a"}))
		return err
	}())
	before := snap(m)
	tests := []struct {
		name   string
		inputs []machine.Input
		want   error
	}{
		{"unknown ID", []machine.Input{machine.ResumeInput{SuspendID: "nope"}}, instance.ErrUnknownSuspendID},
		{"empty ID", []machine.Input{machine.ResumeInput{SuspendID: ""}}, instance.ErrUnknownSuspendID},
		{"empty ID to cancel", []machine.Input{machine.CancelInput{SuspendID: ""}}, instance.ErrUnknownSuspendID},
		{"double resume", []machine.Input{machine.ResumeInput{SuspendID: ids[0], Payload: "again"}}, instance.ErrAlreadyResolved},
		{"same ID twice in a batch", []machine.Input{machine.ResumeInput{SuspendID: ids[1]}, machine.ResumeInput{SuspendID: ids[1]}}, instance.ErrAlreadyResolved},
		{"batch with one bad ID", []machine.Input{machine.UserText("hi"), machine.ResumeInput{SuspendID: ids[1], Payload: "b"}, machine.ResumeInput{SuspendID: "bad"}}, instance.ErrUnknownSuspendID},
		{"payload that does not encode", []machine.Input{machine.ResumeInput{SuspendID: ids[1], Payload: func() {}}}, instance.ErrPayloadDecode},
		{"bad input type", []machine.Input{machine.ResumeInput{SuspendID: ids[1]}, 3.5}, machine.ErrBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collect(m.Run(context.Background(), tt.inputs...))
			require.ErrorIs(t, err, tt.want)
			requireUnchanged(t, before, m)
			require.Equal(t, 1, model.Calls())
		})
	}
	// A correct resume still works.
	steps := run(t, m, machine.ResumeInput{SuspendID: ids[1], Payload: "b"})
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	// And after the whole reply resolved, resuming again is "already resolved".
	_, err = collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: ids[1]}))
	require.ErrorIs(t, err, instance.ErrAlreadyResolved)
}

func TestErrorPayload(t *testing.T) {
	model := scripted.New(scripted.Tool("ask", askIn{"a"}), scripted.Text("sorry"))
	m, ids := parkedDesk(t, model)
	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "manager declined", IsError: true})
	res := lastToolResults(model.Requests()[1].Messages)[0]
	require.True(t, res.IsError)
	require.Equal(t, "manager declined", res.Text)
}

func TestResumeHandler(t *testing.T) {
	type refundIn struct {
		Amount int `json:"amount"`
	}
	// Two-stage approval: amounts over 100 need a second approver.
	refund := node.NewTool("refund", "refund", func(ctx *node.ToolContext[counter], in refundIn) (string, error) {
		return "", ctx.Suspend("first approval")
	}, node.OnResume(func(ctx *node.ToolContext[counter], in refundIn, r node.Resumed[json.RawMessage]) (string, error) {
		a, err := instance.Decode[approval](r.Payload)
		if err != nil {
			return "", err
		}
		if !a.OK {
			return "refund of " + itoa(in.Amount) + " rejected by " + a.By, nil
		}
		if in.Amount > 100 && r.Stage == 0 {
			return "", ctx.Suspend("second approval", instance.WithMetadata(a.By))
		}
		if err := ctx.Update(func(c *counter) { c.Count += in.Amount }); err != nil {
			return "", err
		}
		return "refunded " + itoa(in.Amount), nil
	}))
	n := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{refund}})
	model := scripted.New(scripted.Tool("refund", refundIn{250}), scripted.Text("done"))
	m := newMachine(t, charter(t, model, n), "desk")
	ids := pendingIDs(run(t, m, machine.UserText("refund 250")))
	steps := run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: approval{OK: true, By: "ann"}})
	// The handler suspended again: a new pending call, same tool use.
	require.Equal(t, []machine.YieldReason{machine.AwaitingResume}, reasons(steps))
	again := steps[0].Suspensions
	require.Len(t, again, 1)
	require.NotEqual(t, ids[0], again[0].SuspendID)
	require.Equal(t, 1, again[0].Stage)
	require.Equal(t, "second approval", again[0].Reason)
	by, err := instance.Decode[string](again[0].Metadata)
	require.NoError(t, err)
	require.Equal(t, "ann", by)
	require.Equal(t, 1, model.Calls())
	requireResolved := func(id string) {
		t.Helper()
		before := snap(m)
		_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: id, Payload: approval{OK: true, By: "eve"}}))
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
		requireUnchanged(t, before, m)
	}
	requireResolved(ids[0])
	run(t, m, machine.ResumeInput{SuspendID: again[0].SuspendID, Payload: approval{OK: true, By: "bob"}})
	require.Equal(t, "refunded 250", lastToolResults(model.Requests()[1].Messages)[0].Text)
	require.Equal(t, counter{Count: 250}, m.Root().State)
	// Once the call completed, both stages' IDs are already resolved.
	requireResolved(ids[0])
	requireResolved(again[0].SuspendID)
}

func itoa(n int) string { return string(mustJSON(n)) }

func mustJSON(v any) []byte {
	b, err := instance.EncodePayload(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestCommandSuspendResume(t *testing.T) {
	type signIn struct {
		Doc string `json:"doc"`
	}
	sign := command.New("sign", "get a signature", func(ctx *command.Context[counter], in signIn) (string, error) {
		return "", ctx.Suspend("awaiting signature on " + in.Doc)
	})
	n := mustNode(t, "desk", node.Config[counter]{Commands: []command.Command[counter]{sign}})
	model := scripted.New()
	m := newMachine(t, charter(t, model, n), "desk")
	steps := run(t, m, command.Invoke("sign", signIn{"contract"}))
	require.Len(t, steps, 1)
	s := steps[0]
	require.Equal(t, machine.Command, s.Reason)
	require.True(t, s.Done)
	require.NotNil(t, s.Command.Suspension)
	require.Equal(t, instance.KindCommand, s.Command.Suspension.Kind)
	require.Len(t, s.Suspensions, 1)
	id := s.Command.Suspension.SuspendID

	steps = run(t, m, machine.ResumeInput{SuspendID: id, Payload: "signed by ann"})
	require.Len(t, steps, 1)
	require.Equal(t, machine.Command, steps[0].Reason)
	require.Equal(t, "signed by ann", steps[0].Command.Value)
	require.Equal(t, "sign", steps[0].Command.Name)
	require.Equal(t, 0, model.Calls())
	require.Empty(t, m.Pending())
	// Both halves are recorded in history, never sent to a model.
	h := m.History()
	require.Len(t, h, 2)
	for _, msg := range h {
		require.Equal(t, message.Record, msg.Role)
	}
	require.Equal(t, id, h[1].Parts[0].SuspendID)
}

func TestCommandResolvesSuspension(t *testing.T) {
	type approveIn struct {
		ID string `json:"id"`
	}
	approve := command.New("approve", "approve a pending request", func(ctx *command.Context[counter], in approveIn) (string, error) {
		return "approved", ctx.Resume(in.ID, "approved by command")
	})
	tools := []node.Tool[counter]{askTool[counter]("ask")}
	n := mustNode(t, "desk", node.Config[counter]{Tools: tools, Commands: []command.Command[counter]{approve}})
	model := scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Text("thanks"))
	m := newMachine(t, charter(t, model, n), "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	before := snap(m)
	_, err := collect(m.Run(context.Background(), command.Invoke("approve", approveIn{"missing"})))
	require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
	requireUnchanged(t, before, m)

	steps := run(t, m, command.Invoke("approve", approveIn{ids[0]}))
	require.Equal(t, []machine.YieldReason{machine.Command, machine.EndTurn}, reasons(steps))
	require.Equal(t, "approved", steps[0].Command.Value)
	require.Equal(t, instance.CauseCommand, steps[0].Events[0].Cause)
	require.Equal(t, "approved by command", lastToolResults(model.Requests()[1].Messages)[0].Text)
}

func TestWholeInstanceSuspension(t *testing.T) {
	type waitIn struct {
		For string `json:"for"`
	}
	wait := node.NewTransition("wait_for", "park until an event arrives", func(ctx *node.TransitionContext[counter], in waitIn) (instance.Effect, error) {
		return instance.Effect{}, ctx.Suspend("waiting for " + in.For)
	})
	n := mustNode(t, "desk", node.Config[counter]{Transitions: []node.Transition[counter]{wait}})

	t.Run("from a transition", func(t *testing.T) {
		model := scripted.New(scripted.Tool("wait_for", waitIn{"payment"}), scripted.Text("payment received"))
		m := newMachine(t, charter(t, model, n), "desk")
		steps := run(t, m, machine.UserText("ship when paid"))
		require.Equal(t, []machine.YieldReason{machine.Suspend}, reasons(steps))
		call := steps[0].Suspensions[0]
		require.Equal(t, instance.KindInstance, call.Kind)
		require.Equal(t, instance.ByTransition, call.Initiator)
		require.Empty(t, call.ToolUseID)
		// The transition's call was answered at once; the instance is parked.
		require.Equal(t, "suspended: waiting for payment", lastToolResults(m.History())[0].Text)
		steps = run(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: "paid 30 EUR"})
		require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
		msgs := model.Requests()[1].Messages
		require.Equal(t, "paid 30 EUR", msgs[len(msgs)-1].Text())
	})

	// An error resolution reaches the instance as an error (issue 29 item
	// 7): flagged, and worded as one, not as the user's words.
	t.Run("with an error", func(t *testing.T) {
		model := scripted.New(scripted.Tool("wait_for", waitIn{"payment"}), scripted.Text("noted"))
		m := newMachine(t, charter(t, model, n), "desk")
		call := run(t, m, machine.UserText("ship when paid"))[0].Suspensions[0]
		run(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: "card declined", IsError: true})
		msgs := model.Requests()[1].Messages
		last := msgs[len(msgs)-1]
		require.Equal(t, message.User, last.Role)
		require.Len(t, last.Parts, 1)
		p := last.Parts[0]
		require.True(t, p.IsError, "the error flag was lost")
		require.Equal(t, call.SuspendID, p.SuspendID)
		require.Contains(t, p.Text, "card declined")
		require.True(t, strings.HasPrefix(p.Text, "Error: "), p.Text)
		require.Contains(t, p.Text, "not with a message from the user")
		// It is kept so in history, and through a save.
		var kept []message.Part
		for _, msg := range m.History() {
			for _, p := range msg.Parts {
				if p.Kind == message.KindText && p.SuspendID == call.SuspendID {
					kept = append(kept, p)
				}
			}
		}
		require.Equal(t, []message.Part{p}, kept)
		raw, err := serialize.MarshalMessage(last)
		require.NoError(t, err)
		back, err := serialize.UnmarshalMessage(raw)
		require.NoError(t, err)
		require.True(t, back.Parts[0].IsError)
	})

	t.Run("from the caller", func(t *testing.T) {
		model := scripted.New(scripted.Text("hello"), scripted.Text("welcome back"))
		m := newMachine(t, charter(t, model, n), "desk")
		run(t, m, machine.UserText("hi"))
		id, err := m.Suspend("operator takes over", instance.WithID("op-1"))
		require.NoError(t, err)
		require.Equal(t, "op-1", id)
		_, err = m.Suspend("again", instance.WithID("op-1"))
		require.ErrorIs(t, err, executor.ErrDuplicateID)
		// Input while parked is kept, and the model is not called.
		steps := run(t, m, machine.UserText("are you there?"))
		require.Equal(t, []machine.YieldReason{machine.AwaitingResume}, reasons(steps))
		require.Equal(t, 1, model.Calls())
		steps = run(t, m, machine.ResumeInput{SuspendID: id})
		require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
		msgs := model.Requests()[1].Messages
		require.Equal(t, "are you there?", msgs[len(msgs)-1].Text())
	})
}

func TestSuspendedWorkerBesidePrimary(t *testing.T) {
	root := mustNode(t, "root", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty]()}})
	chat := mustNode(t, "chat", node.Config[empty]{})
	worker := mustNode(t, "worker", node.Config[empty]{
		Worker: true, Tools: []node.Tool[empty]{askTool[empty]("ask")},
		Transitions: []node.Transition[empty]{node.Ceder[empty]("")},
	})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"root":   {scripted.Tool("spawn", spawnArgs{[]string{"chat", "worker"}})},
		"chat":   {scripted.Text("working on it"), scripted.Text("still here")},
		"worker": {scripted.Tool("ask", askIn{"data"}), scripted.Tool("cede", map[string]string{"content": "data ready"})},
	})
	m := newMachine(t, charter(t, model, root, chat, worker), "root")
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.Suspend}, reasons(steps))
	require.True(t, steps[1].Done)
	require.Len(t, steps[1].Suspensions, 1)
	// The primary finished its turn; the worker waits.
	tree := m.Root()
	require.True(t, tree.Children[0].Idle)
	require.True(t, tree.Children[1].Suspended())
	// The primary keeps talking while the worker is parked.
	steps = run(t, m, machine.UserText("status?"))
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	require.Len(t, steps[0].Suspensions, 1, "the last step lists what is still pending")
	steps = run(t, m, machine.ResumeInput{SuspendID: steps[0].Suspensions[0].SuspendID, Payload: "rows"})
	require.Equal(t, []machine.YieldReason{machine.Cede}, reasons(steps))
	require.Len(t, m.Root().Children, 1)
}

// TestAllSuspendedKeepsInput: input sent while every leaf is suspended is
// kept, and enters history after the held reply and its results, so the
// model sees its own call before the words that came later — also across
// a restart.
func TestAllSuspendedKeepsInput(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "in memory", true: "across a restart"}[restart], func(t *testing.T) {
			model := scripted.New(scripted.Tool("ask", askIn{"a"}), scripted.Text("done"))
			c := charter(t, model, suspendNode(t), doneNode(t))
			m := newMachine(t, c, "desk")
			ids := pendingIDs(run(t, m, machine.UserText("go")))
			steps := run(t, m, machine.UserText("hurry up"))
			require.Equal(t, []machine.YieldReason{machine.AwaitingResume}, reasons(steps))
			require.Equal(t, ids, pendingIDs(steps))
			require.Equal(t, 1, model.Calls())
			if restart {
				var err error
				m, err = serialize.Unmarshal(c, marshal(t, m))
				require.NoError(t, err)
			}
			steps = run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "ok"})
			require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
			want := []message.Role{message.User, message.Assistant, message.Tool, message.User}
			msgs := model.Requests()[1].Messages
			require.Equal(t, want, roles(msgs))
			require.Equal(t, []string{"go", "hurry up"}, []string{msgs[0].Text(), msgs[3].Text()})
			require.Equal(t, []string{"ok"}, texts(msgs[2].Parts))
			require.Equal(t, append(want, message.Assistant), roles(m.History()))
		})
	}
}

// TestInputBehindATerminalReply: input deferred behind a held reply with a
// terminal tool starts a new turn once the reply is released.
func TestInputBehindATerminalReply(t *testing.T) {
	finish := node.NewTool("finish", "end the conversation", func(*node.ToolContext[counter], empty) (string, error) {
		return "goodbye", nil
	}, node.Terminal())
	model := scripted.New(scripted.Tools(scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "finish"}), scripted.Text("one more thing, then"))
	m := newMachine(t, charter(t, model, suspendNode(t, finish), doneNode(t)), "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	run(t, m, machine.UserText("wait, one more thing"))
	steps := run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "ok"})
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	require.Equal(t, 2, model.Calls())
	msgs := model.Requests()[1].Messages
	require.Equal(t, []message.Role{message.User, message.Assistant, message.Tool, message.User}, roles(msgs))
	require.Equal(t, "wait, one more thing", msgs[3].Text())
}

func roles(msgs []message.Message) []message.Role {
	out := make([]message.Role, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

func TestHeldTransition(t *testing.T) {
	model := scripted.New(scripted.Tools(scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "transition_to_done"}), scripted.Text("finished"))
	m, ids := parkedDesk(t, model)
	require.Equal(t, "desk", m.Root().Node, "the transition waits for the suspension")
	steps := run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "ok"})
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	require.Equal(t, "done", m.Root().Node)
	require.Equal(t, "done", model.Requests()[1].Node)
}

func TestSuspensionWithTerminalTool(t *testing.T) {
	finish := node.NewTool("finish", "end the conversation", func(*node.ToolContext[counter], empty) (string, error) {
		return "goodbye", nil
	}, node.Terminal())
	model := scripted.New(scripted.Tools(scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "finish"}))
	m := newMachine(t, charter(t, model, suspendNode(t, finish), doneNode(t)), "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	steps := run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "ok"})
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	require.True(t, steps[0].Done)
	require.Equal(t, 1, model.Calls(), "no model call after a terminal tool")
	require.Len(t, steps[0].Messages, 2)
	require.Equal(t, []string{"ok", "goodbye"}, texts(lastToolResults(m.History())))
}

// TestTerminalToolWithTransition: a terminal tool in the same reply as a
// transition ends the turn on the new node, whether the reply ran at once
// or was held behind a suspension.
func TestTerminalToolWithTransition(t *testing.T) {
	finish := node.NewTool("finish", "end the conversation", func(*node.ToolContext[counter], empty) (string, error) {
		return "goodbye", nil
	}, node.Terminal())
	tests := []struct {
		name  string
		calls []scripted.Call
	}{
		{"immediate", []scripted.Call{{Name: "transition_to_done"}, {Name: "finish"}}},
		{"held", []scripted.Call{{Name: "ask", Input: askIn{"a"}}, {Name: "transition_to_done"}, {Name: "finish"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := scripted.New(scripted.Tools(tt.calls...), scripted.Text("called again"))
			m := newMachine(t, charter(t, model, suspendNode(t, finish), doneNode(t)), "desk")
			steps := run(t, m, machine.UserText("go"))
			if ids := pendingIDs(steps); len(ids) > 0 {
				steps = run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "ok"})
			}
			require.True(t, steps[len(steps)-1].Done)
			require.Equal(t, 1, model.Calls(), "no model call after a terminal tool")
			root := m.Root()
			require.Equal(t, "done", root.Node, "the transition applied")
			require.True(t, root.Idle)
		})
	}
}

func TestDeadlineExpiry(t *testing.T) {
	type in struct {
		Resume bool `json:"resume"`
	}
	timed := node.NewTool("timed", "", func(ctx *node.ToolContext[counter], i in) (string, error) {
		if i.Resume {
			return "", ctx.Suspend("timed", instance.WithTimeout(time.Hour), instance.OnTimeoutResume("auto-approved", false))
		}
		return "", ctx.Suspend("timed", instance.WithTimeout(time.Hour))
	})
	tests := []struct {
		name    string
		resume  bool
		want    string
		wantErr bool
	}{
		{"fail", false, "expired at", true},
		{"resume with payload", true, "auto-approved", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			model := scripted.New(scripted.Tool("timed", in{tt.resume}), scripted.Text("after"))
			n := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{timed}})
			c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Clock: clk.Now})
			m := newMachine(t, c, "desk")
			steps := run(t, m, machine.UserText("go"))
			call := steps[0].Suspensions[0]
			require.Equal(t, clk.Now().Add(time.Hour), call.Deadline)
			// Before the deadline nothing happens.
			require.Empty(t, run(t, m)[0].Events)
			clk.Advance(time.Hour)
			// A resume after the deadline fails and changes nothing.
			before := snap(m)
			_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: call.SuspendID, Payload: "late"}))
			require.ErrorIs(t, err, machine.ErrDeadlinePassed)
			requireUnchanged(t, before, m)
			// The next run applies the on-timeout action.
			steps = run(t, m)
			require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
			require.Equal(t, instance.EventExpired, steps[0].Events[0].Type)
			require.Equal(t, instance.CauseTimeout, steps[0].Events[0].Cause)
			res := lastToolResults(model.Requests()[1].Messages)[0]
			require.Contains(t, res.Text, tt.want)
			require.Equal(t, tt.wantErr, res.IsError)
			_, err = collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: call.SuspendID}))
			require.ErrorIs(t, err, instance.ErrAlreadyResolved)
		})
	}
}

// TestExpiryOff: with the machine's own expiry off, a run after the
// deadline neither expires the call nor refuses its result; Expire still
// expires at the time it is given.
func TestExpiryOff(t *testing.T) {
	clk := newClock()
	n := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{node.NewTool("wait", "", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		return "", ctx.Suspend("w", instance.WithDeadline(clk.Now().Add(time.Minute)))
	})}})
	model := scripted.New(scripted.Tool("wait", nil), scripted.Text("moved on"), scripted.Tool("wait", nil), scripted.Text("again"))
	m := newMachine(t, charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Clock: clk.Now}), "desk")
	m.SetExpiry(false)
	id := pendingIDs(run(t, m, machine.UserText("go")))[0]
	clk.Advance(time.Hour)
	require.Empty(t, run(t, m)[0].Events, "no expiry on the run's clock")
	require.Len(t, m.Pending(), 1)
	steps := run(t, m, machine.ResumeInput{SuspendID: id, Payload: "late but accepted"})
	require.Equal(t, instance.EventResumed, steps[0].Events[0].Type)
	require.Equal(t, "late but accepted", lastToolResults(model.Requests()[1].Messages)[0].Text)

	run(t, m, machine.UserText("once more"))
	events, err := m.Expire(clk.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, events, 1, "Expire judges at the time it is given")
	require.Empty(t, m.Pending())
}

func TestExpireSweep(t *testing.T) {
	clk := newClock()
	n := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{node.NewTool("wait", "", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		return "", ctx.Suspend("w", instance.WithDeadline(clk.Now().Add(time.Minute)))
	})}})
	model := scripted.New(scripted.Tool("wait", nil), scripted.Text("moved on"))
	m := newMachine(t, charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Clock: clk.Now}), "desk")
	run(t, m, machine.UserText("go"))
	events, err := m.Expire(clk.Now())
	require.NoError(t, err)
	require.Empty(t, events)
	events, err = m.Expire(clk.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Empty(t, m.Pending())
	steps := run(t, m)
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	// The next step reports what the sweep released, as for a resume.
	require.Equal(t, []message.Role{message.Assistant, message.Tool, message.Assistant}, roles(steps[0].Messages))
	require.Contains(t, steps[0].Messages[1].Parts[0].Text, "expired at")
	require.Equal(t, events, steps[0].Events)
}

func TestSuspendWithResultIsAnError(t *testing.T) {
	bad := node.NewTool("bad", "", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		return "partial", ctx.Suspend("both")
	})
	model := scripted.New(scripted.Tool("bad", nil), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, suspendNode(t, bad), doneNode(t)), "desk")
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.EndTurn}, reasons(steps))
	res := lastToolResults(m.History())[0]
	require.True(t, res.IsError)
	require.Contains(t, res.Text, instance.ErrSuspendWithResult.Error())
}

func TestTypedMetadataAndPendingCopies(t *testing.T) {
	type meta struct {
		OrderID int     `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	tool := node.NewTool("ask_meta", "", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		return "", ctx.Suspend("m", instance.WithMetadata(meta{OrderID: 42, Amount: 9.5}), instance.WithID("custom-1"))
	})
	model := scripted.New(scripted.Tool("ask_meta", nil))
	m := newMachine(t, charter(t, model, suspendNode(t, tool), doneNode(t)), "desk")
	run(t, m, machine.UserText("go"))
	p := m.Pending()
	require.Len(t, p, 1)
	require.Equal(t, "custom-1", p[0].SuspendID)
	got, err := instance.Decode[meta](p[0].Metadata)
	require.NoError(t, err)
	require.Equal(t, meta{OrderID: 42, Amount: 9.5}, got)
	asMap, err := instance.Decode[map[string]any](p[0].Metadata)
	require.NoError(t, err)
	require.IsType(t, float64(0), asMap["order_id"])
	id, err := instance.Decode[int](mustJSON(42))
	require.NoError(t, err)
	require.Equal(t, 42, id)
	_, err = instance.Decode[int](p[0].Metadata)
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
	// Pending returns copies.
	p[0].Metadata[0] = 'X'
	p[0].Reason = "changed"
	require.Equal(t, "m", m.Pending()[0].Reason)
	require.Equal(t, byte('{'), m.Pending()[0].Metadata[0])
}

func TestSuspendOptionErrors(t *testing.T) {
	tool := node.NewTool("bad_meta", "", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		return "", ctx.Suspend("m", instance.WithMetadata(func() {}))
	})
	model := scripted.New(scripted.Tool("bad_meta", nil), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, suspendNode(t, tool), doneNode(t)), "desk")
	run(t, m, machine.UserText("go"))
	res := lastToolResults(m.History())[0]
	require.True(t, res.IsError)
	require.True(t, errors.Is(instance.ErrPayloadDecode, instance.ErrPayloadDecode))
	require.Contains(t, res.Text, instance.ErrPayloadDecode.Error())
}

func TestCancel(t *testing.T) {
	model := scripted.New(scripted.Tools(scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "ask2", Input: askIn{"b"}}), scripted.Text("ok"))
	m, ids := parkedDesk(t, model)
	before := snap(m)
	_, err := collect(m.Run(context.Background(), machine.CancelInput{SuspendID: ids[0]}, machine.CancelInput{SuspendID: "nope"}))
	require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
	requireUnchanged(t, before, m)
	steps := run(t, m, machine.CancelInput{SuspendID: ids[0], Reason: "customer left"}, machine.ResumeInput{SuspendID: ids[1], Payload: "fine"})
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	require.Equal(t, instance.EventCancelled, steps[0].Events[0].Type)
	res := lastToolResults(model.Requests()[1].Messages)
	require.Equal(t, []string{"cancelled: customer left", "fine"}, texts(res))
	require.True(t, res[0].IsError)
	_, err = collect(m.Run(context.Background(), machine.CancelInput{SuspendID: ids[0]}))
	require.ErrorIs(t, err, instance.ErrAlreadyResolved)
}

func TestApplyThenRun(t *testing.T) {
	model := scripted.New(scripted.Tool("ask", askIn{"a"}), scripted.Text("done"))
	m, ids := parkedDesk(t, model)
	before := snap(m)
	_, err := m.Apply(context.Background(), machine.ResumeInput{SuspendID: "bad"})
	require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
	requireUnchanged(t, before, m)
	steps, err := m.Apply(context.Background(), machine.ResumeInput{SuspendID: ids[0], Payload: "ok"})
	require.NoError(t, err)
	require.Empty(t, steps)
	require.Equal(t, 1, model.Calls(), "Apply calls no model")
	require.Equal(t, 3, len(m.History()))
	steps = run(t, m)
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	// The first step reports what the applied resume added.
	require.Len(t, steps[0].Messages, 3)
	require.Equal(t, instance.EventResumed, steps[0].Events[0].Type)
}

func TestDuplicateIDsAreRejected(t *testing.T) {
	fixed := node.NewTool("fixed", "", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		return "", ctx.Suspend("f", instance.WithID("same"))
	})
	model := scripted.New(scripted.Tools(scripted.Call{Name: "fixed"}, scripted.Call{Name: "fixed"}))
	m := newMachine(t, charter(t, model, suspendNode(t, fixed), doneNode(t)), "desk")
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, []string{"same"}, pendingIDs(steps))
	held := m.Root().Suspension.Reply.Results
	require.True(t, held[1].IsError)
	require.Contains(t, held[1].Text, `ID already in use: suspend ID "same"`)

	type idArgs struct {
		ID string `json:"id"`
	}
	spawn := node.NewTransition("spawn_two", "", func(_ *node.TransitionContext[empty], a idArgs) (instance.Effect, error) {
		return instance.Spawn(instance.Child{ID: a.ID, Node: "w"}, instance.Child{ID: a.ID, Node: "w"}), nil
	})
	lead := mustNode(t, "lead", node.Config[empty]{Transitions: []node.Transition[empty]{spawn}})
	w := mustNode(t, "w", node.Config[empty]{Worker: true})
	model = scripted.New(scripted.Tool("spawn_two", idArgs{"dup"}), scripted.Text("ok"))
	m = newMachine(t, charter(t, model, lead, w), "lead")
	run(t, m, machine.UserText("go"))
	require.Empty(t, m.Root().Children)
	res := lastToolResults(m.History())[0]
	require.True(t, res.IsError)
	require.Contains(t, res.Text, `ID already in use: instance ID "dup"`)
}

func TestUpdateBeforeSuspendIsKept(t *testing.T) {
	mark := node.NewTool("mark_and_ask", "", func(ctx *node.ToolContext[counter], _ empty) (string, error) {
		if err := ctx.Update(func(c *counter) { c.Label = "awaiting approval" }); err != nil {
			return "", err
		}
		return "", ctx.Suspend("approval")
	})
	model := scripted.New(scripted.Tool("mark_and_ask", nil))
	m := newMachine(t, charter(t, model, suspendNode(t, mark), doneNode(t)), "desk")
	run(t, m, machine.UserText("go"))
	require.Equal(t, counter{Label: "awaiting approval"}, m.Root().State)
}

func TestCallerSuspendInsideTheLoop(t *testing.T) {
	model := scripted.New(scripted.Tool("add1", nil), scripted.Tool("add1", nil), scripted.Text("done"))
	m := deskMachine(t, model)
	var got []machine.Step
	var id string
	for s, err := range m.Run(context.Background(), machine.UserText("go")) {
		require.NoError(t, err)
		got = append(got, s)
		if id == "" {
			var err error
			id, err = m.Suspend("operator review")
			require.NoError(t, err)
		}
	}
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.AwaitingResume}, reasons(got))
	require.True(t, got[1].Done)
	require.Equal(t, id, got[1].Suspensions[0].SuspendID)
	require.Equal(t, 1, model.Calls())
	steps := run(t, m, machine.ResumeInput{SuspendID: id})
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.EndTurn}, reasons(steps))
}

func TestCancelledContextAppliesNothing(t *testing.T) {
	model := scripted.New(scripted.Tool("ask", askIn{"a"}), scripted.Text("done"))
	m, ids := parkedDesk(t, model)
	before := snap(m)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resume := machine.ResumeInput{SuspendID: ids[0], Payload: "ok"}
	_, err := collect(m.Run(ctx, resume, machine.UserText("more")))
	require.ErrorIs(t, err, context.Canceled)
	requireUnchanged(t, before, m)
	_, err = m.Apply(ctx, resume)
	require.ErrorIs(t, err, context.Canceled)
	requireUnchanged(t, before, m)
	require.Equal(t, 1, model.Calls())
	// Retrying with a live context resumes: nothing was consumed.
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(run(t, m, resume)))
}
