package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

type counter struct {
	N int `json:"n"`
}

type addIn struct {
	By int `json:"by"`
}

type askIn struct {
	Question string `json:"question"`
}

type approval struct {
	OK bool `json:"ok"`
}

var epoch = time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)

// desk is the fixture: a node whose tools add to a counter and ask a
// human (suspending, with a typed payload and a resume handler), with a
// transition to "done" and a command that resets the counter and may move
// on.
func desk(t *testing.T) []*node.Node {
	t.Helper()
	add := node.NewTool("add", "add to the counter", func(ctx *node.ToolContext[counter], in addIn) (string, error) {
		if in.By < 0 {
			return "", errors.New("only positive steps")
		}
		return "added " + strconv.Itoa(in.By), ctx.Update(func(s *counter) { s.N += in.By })
	})
	ask := node.NewTool("ask", "ask a human", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("needs a human: "+in.Question, instance.WithID("ask-"+in.Question))
	}, node.ResumeWith[approval](), node.OnResume(func(ctx *node.ToolContext[counter], in askIn, r node.Resumed[json.RawMessage]) (string, error) {
		a, err := instance.Decode[approval](r.Payload)
		if err != nil {
			return "", err
		}
		if !a.OK {
			return "declined", nil
		}
		return "approved " + in.Question, ctx.Update(func(s *counter) { s.N = 100 })
	}))
	type resetIn struct {
		Finish bool `json:"finish"`
	}
	reset := command.New("reset", "reset the counter", func(ctx *command.Context[counter], in resetIn) (int, error) {
		old := ctx.State().N
		if err := ctx.Update(func(s *counter) { s.N = 0 }); err != nil {
			return 0, err
		}
		if in.Finish {
			ctx.TransitionTo("done", nil)
		}
		return old, nil
	})
	wait := command.New("wait", "wait for sign-off", func(ctx *command.Context[counter], _ struct{}) (string, error) {
		return "", ctx.Suspend("sign-off", instance.WithID("wait-1"))
	})
	stray := command.New("stray", "move to a node that is not there", func(ctx *command.Context[counter], _ struct{}) (string, error) {
		ctx.TransitionTo("nowhere", nil)
		return "", nil
	})
	d, err := node.New("desk", node.Config[counter]{
		Tools:       []node.Tool[counter]{add, ask},
		Transitions: []node.Transition[counter]{node.To[counter]("done", "finish")},
		Commands:    []command.Command[counter]{reset, wait, stray},
	})
	require.NoError(t, err)
	done, err := node.New("done", node.Config[counter]{Initial: counter{N: -1}})
	require.NoError(t, err)
	return []*node.Node{d, done}
}

// newExecutor returns the standard executor over the fixture's nodes with
// a fixed clock and sequential IDs.
func newExecutor(t *testing.T, model llm.Model) executor.Executor {
	ids := 0
	return executor.New(executor.Config{
		Model: model,
		Nodes: desk(t),
		Clock: func() time.Time { return epoch },
		NewID: func() string { ids++; return "id-" + strconv.Itoa(ids) },
	})
}

func tree(n int) *instance.Instance {
	return &instance.Instance{ID: "root", Node: "desk", State: counter{N: n}}
}

func step(t *testing.T, e executor.Executor, root *instance.Instance) *executor.StepResult {
	t.Helper()
	r, err := e.Step(context.Background(), &executor.StepRequest{Root: root, Instance: root, Transcript: []message.Message{message.UserText("go")}})
	require.NoError(t, err)
	return r
}

func TestStepRunsToolsInOrder(t *testing.T) {
	model := scripted.New(scripted.Tools(
		scripted.Call{Name: "add", Input: addIn{By: 2}},
		scripted.Call{Name: "add", Input: addIn{By: -1}},
		scripted.Call{Name: "missing", Input: addIn{}},
		scripted.Call{Name: "add", Input: addIn{By: 3}},
	))
	root := tree(1)
	r := step(t, newExecutor(t, model), root)

	require.Equal(t, counter{N: 6}, r.State, "each tool sees the state the previous one left")
	require.True(t, r.StateChanged)
	require.Equal(t, counter{N: 1}, root.State, "the request's tree is not written")
	require.Equal(t, message.Assistant, r.Reply.Message.Role)
	require.Equal(t, message.Source{InstanceID: "root", Node: "desk"}, r.Reply.Message.Source)
	require.Equal(t, llm.ToolUse, r.Reply.Stop)
	texts := make([]string, len(r.Results))
	for i, p := range r.Results {
		texts[i] = p.Text
		require.Equal(t, r.Reply.Message.ToolUses()[i].ID, p.ID, "results pair with tool uses in order")
	}
	require.Equal(t, []string{"added 2", "only positive steps", `unknown tool "missing"`, "added 3"}, texts)
	require.False(t, r.Results[0].IsError)
	require.True(t, r.Results[1].IsError)
	require.Empty(t, r.Suspended)
	require.False(t, r.HoldsReply())

	sent := model.Requests()[0]
	require.Equal(t, []string{"add", "ask", "transition_to_done"}, specNames(sent.Tools))
	require.Contains(t, sent.System, `{"n":1}`)
}

func specNames(specs []llm.ToolSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

func TestStepSuspends(t *testing.T) {
	model := scripted.New(scripted.Tools(
		scripted.Call{Name: "add", Input: addIn{By: 2}},
		scripted.Call{Name: "ask", Input: askIn{Question: "refund"}},
	))
	r := step(t, newExecutor(t, model), tree(0))

	require.Len(t, r.Suspended, 1)
	c := r.Suspended[0]
	require.Equal(t, "ask-refund", c.SuspendID)
	require.Equal(t, r.Reply.Message.ToolUses()[1].ID, c.ToolUseID)
	require.Equal(t, instance.KindTool, c.Kind)
	require.Equal(t, instance.StatusPending, c.Status)
	require.Equal(t, "needs a human: refund", c.Reason)
	require.Equal(t, epoch, c.SuspendedAt)
	require.JSONEq(t, `{"question":"refund"}`, string(c.Input))
	require.NotEmpty(t, c.PayloadSchema, "ResumeWith declares the payload")
	require.Equal(t, message.Part{}, r.Results[1], "the suspended call's slot stays empty")
	require.Equal(t, "added 2", r.Results[0].Text, "a sibling that completes keeps its result")
	require.Equal(t, counter{N: 2}, r.State)
	require.True(t, r.HoldsReply())
}

func TestStepRefusesSuspendIDInUse(t *testing.T) {
	model := scripted.New(scripted.Tool("ask", askIn{Question: "x"}))
	root := tree(0)
	leaf := &instance.Instance{ID: "ask-x", Node: "desk", State: counter{}} // its ID is the suspend ID the tool picks
	root.Children = []*instance.Instance{leaf}
	r, err := newExecutor(t, model).Step(context.Background(), &executor.StepRequest{Root: root, Instance: leaf})
	require.NoError(t, err)
	require.Empty(t, r.Suspended)
	require.True(t, r.Results[0].IsError)
	require.Contains(t, r.Results[0].Text, executor.ErrDuplicateID.Error())
}

func TestStepTransition(t *testing.T) {
	model := scripted.New(scripted.Tools(
		scripted.Call{Name: "transition_to_done", Input: map[string]any{}},
		scripted.Call{Name: "transition_to_done", Input: map[string]any{}},
	))
	r := step(t, newExecutor(t, model), tree(3))
	require.NotNil(t, r.Transition)
	require.Equal(t, instance.EffectGoto, r.Transition.Kind)
	require.Equal(t, "done", r.Transition.Target)
	require.Equal(t, counter{N: -1}, r.Transition.State, "a transition without state starts from the target's initial state")
	require.Equal(t, "transitioned to done", r.Results[0].Text)
	require.True(t, r.Results[1].IsError)
	require.Equal(t, executor.ErrTransitionLimit.Error(), r.Results[1].Text)
}

// TestStepSplitsAtReply checks the checkpoint contract: a ReplyOnly step
// returns the prepared reply and runs nothing; a step given that reply
// calls no model and ends as the whole step does.
func TestStepSplitsAtReply(t *testing.T) {
	script := func() *scripted.Model {
		return scripted.New(scripted.Tools(
			scripted.Call{ID: "dup", Name: "add", Input: addIn{By: 2}},
			scripted.Call{ID: "dup", Name: "ask", Input: askIn{Question: "q"}},
		))
	}
	transcript := []message.Message{message.UserText("go")}
	whole := step(t, newExecutor(t, script()), tree(0))

	model := script()
	e := newExecutor(t, model)
	root := tree(0)
	first, err := e.Step(context.Background(), &executor.StepRequest{Root: root, Instance: root, Transcript: transcript, ReplyOnly: true})
	require.NoError(t, err)
	require.Empty(t, first.Results, "no tool ran")
	require.Empty(t, first.Suspended)
	require.False(t, first.StateChanged)
	ids := []string{first.Reply.Message.ToolUses()[0].ID, first.Reply.Message.ToolUses()[1].ID}
	require.Equal(t, []string{"dup", "toolu_markov_id-1_2"}, ids, "the saved reply is already repaired")

	saved, err := json.Marshal(first.Reply)
	require.NoError(t, err)
	var reply executor.Reply
	require.NoError(t, json.Unmarshal(saved, &reply))
	second, err := e.Step(context.Background(), &executor.StepRequest{Root: root, Instance: root, Transcript: transcript, Reply: &reply})
	require.NoError(t, err)
	require.Equal(t, 1, model.Calls(), "continuing from a reply calls no model")
	if diff := cmp.Diff(whole, second); diff != "" {
		t.Errorf("split step differs from the whole step (-whole +split):\n%s", diff)
	}
}

func TestResume(t *testing.T) {
	e := newExecutor(t, scripted.New(scripted.Tool("ask", askIn{Question: "q"})))
	root := tree(1)
	r := step(t, e, root)
	call := r.Suspended[0]
	resume := func(payload any) *executor.ResumeResult {
		raw, err := instance.EncodePayload(payload)
		require.NoError(t, err)
		res, err := e.Resume(context.Background(), &executor.ResumeRequest{Root: root, Instance: root, Call: call,
			Resolution: instance.Resolution{SuspendID: call.SuspendID, Payload: raw}})
		require.NoError(t, err)
		return res
	}

	ok := resume(approval{OK: true})
	require.Equal(t, "approved q", ok.Result.Text)
	require.Equal(t, call.ToolUseID, ok.Result.ID)
	require.Equal(t, counter{N: 100}, ok.State)
	require.True(t, ok.StateChanged)
	require.Nil(t, ok.Again)
	require.Equal(t, counter{N: 1}, root.State)

	no := resume(approval{OK: false})
	require.Equal(t, "declined", no.Result.Text)
	require.False(t, no.StateChanged)
}

func TestCommand(t *testing.T) {
	e := newExecutor(t, nil)
	root := tree(7)
	run := func(name, input string) (*executor.CommandResult, error) {
		return e.Command(context.Background(), &executor.CommandRequest{Root: root, Instance: root, Name: name, Input: json.RawMessage(input)})
	}

	r, err := run("reset", `{"finish":true}`)
	require.NoError(t, err)
	require.Equal(t, 7, r.Value)
	require.Equal(t, counter{N: 0}, r.State)
	require.True(t, r.StateChanged)
	require.Equal(t, &instance.Effect{Kind: instance.EffectGoto, Target: "done", State: counter{N: -1}}, r.Transition)
	require.Equal(t, counter{N: 7}, root.State, "the command's writes are returned, not applied")

	r, err = run("wait", `{}`)
	require.NoError(t, err)
	require.Nil(t, r.Value)
	require.NotNil(t, r.Suspended)
	require.Equal(t, "wait-1", r.Suspended.SuspendID)
	require.Equal(t, instance.KindCommand, r.Suspended.Kind)
}

func TestBadInput(t *testing.T) {
	e := newExecutor(t, nil)
	root := tree(0)
	invoke := func(name, input string) error {
		_, err := e.Command(context.Background(), &executor.CommandRequest{Root: root, Instance: root, Name: name, Input: json.RawMessage(input)})
		return err
	}
	require.ErrorIs(t, invoke("nope", `{}`), command.ErrUnknownCommand)
	require.ErrorIs(t, invoke("reset", `{"finish":"yes"}`), instance.ErrInvalidInput)
	require.ErrorIs(t, invoke("stray", `{}`), executor.ErrUnknownNode)

	stranger := &instance.Instance{ID: "x", Node: "ghost"}
	_, err := e.Step(context.Background(), &executor.StepRequest{Root: stranger, Instance: stranger})
	require.ErrorIs(t, err, executor.ErrUnknownNode)

	_, err = newExecutor(t, nilModel{}).Step(context.Background(), &executor.StepRequest{Root: root, Instance: root})
	require.ErrorIs(t, err, executor.ErrNoResponse)

	failing := scripted.New(scripted.Reply{Err: errors.New("provider down")})
	_, err = newExecutor(t, failing).Step(context.Background(), &executor.StepRequest{Root: root, Instance: root})
	require.ErrorContains(t, err, "provider down")
}

// nilModel answers with neither a response nor an error.
type nilModel struct{}

func (nilModel) Generate(context.Context, *llm.Request) (*llm.Response, error) { return nil, nil }
