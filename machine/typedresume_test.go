package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// decision is the payload a typed approval accepts.
type decision struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note,omitempty"`
}

const decisionSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},"note":{"type":"string"}},"required":["approved"],"additionalProperties":false}`

// typedDesk is a node whose "ask" tool takes a decision on resume, and
// whose "grant" command resolves any suspension with its input.
func typedDesk(t *testing.T, opts ...instance.SuspendOption) *node.Node {
	ask := node.NewTool("ask", "ask a manager", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("approve "+in.What, opts...)
	}, node.ResumeWith[decision]())
	type grantIn struct {
		ID      string `json:"id"`
		Payload any    `json:"payload"`
	}
	grant := command.New("grant", "resolve a suspension", func(ctx *command.Context[counter], in grantIn) (string, error) {
		return "granted", ctx.Resume(in.ID, in.Payload)
	})
	return mustNode(t, "desk", node.Config[counter]{
		Tools:    []node.Tool[counter]{ask, askTool[counter]("free")},
		Commands: []command.Command[counter]{grant},
	})
}

// typedSuspended returns a machine suspended on one typed "ask" call and
// its suspend ID.
func typedSuspended(t *testing.T, replies ...scripted.Reply) (*machine.Machine, *scripted.Model, string) {
	t.Helper()
	model := scripted.New(append([]scripted.Reply{scripted.Tool("ask", askIn{"refund"})}, replies...)...)
	m := newMachine(t, charter(t, model, typedDesk(t)), "desk")
	steps := run(t, m, machine.UserText("refund order 42"))
	ids := pendingIDs(steps)
	require.Len(t, ids, 1)
	return m, model, ids[0]
}

func TestTypedResumeRecordsSchema(t *testing.T) {
	m, _, id := typedSuspended(t)
	pending := m.Pending()
	require.Len(t, pending, 1)
	require.Equal(t, id, pending[0].SuspendID)
	require.JSONEq(t, decisionSchema, string(pending[0].PayloadSchema))
	// It survives a restart.
	m2, err := serialize.Unmarshal(m.Charter(), marshal(t, m))
	require.NoError(t, err)
	require.Equal(t, pending, m2.Pending())
}

func TestTypedResumeRejectsBadPayloads(t *testing.T) {
	cases := []struct {
		name    string
		payload any
		message string // for a person: short, naming the field
	}{
		{"wrong type", json.RawMessage(`{"approved":"yes"}`), "payload: approved: expected boolean, got string"},
		{"wrong type deeper", json.RawMessage(`{"approved":true,"note":7}`), "payload: note: expected string, got integer"},
		{"missing field", json.RawMessage(`{"note":"fine"}`), "payload: approved: required"},
		{"unknown field", map[string]any{"approved": true, "by": "bob"}, "payload: by: unknown field"},
		{"string", "yes", "payload: expected object, got string"},
		{"bytes", []byte(`[true]`), "payload: expected object, got array"},
		{"no payload", nil, "payload: missing"},
		{"Go value of another type", approval{OK: true}, "payload: by: unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, model, id := typedSuspended(t, scripted.Text("refund approved"))
			before := snap(m)
			data := marshal(t, m)
			// CheckPayload tells, running nothing, the error Run gives.
			checked := m.CheckPayload(machine.ResumeInput{SuspendID: id, Payload: tc.payload})
			require.ErrorIs(t, checked, instance.ErrPayloadDecode)
			require.NoError(t, m.CheckPayload(machine.ResumeInput{SuspendID: id, Payload: tc.payload, IsError: true}), "an error payload is not checked")
			require.NoError(t, m.CheckPayload(machine.ResumeInput{SuspendID: id, Payload: decision{Approved: true}}))
			require.Equal(t, data, marshal(t, m))
			_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: id, Payload: tc.payload}))
			require.ErrorIs(t, err, instance.ErrPayloadDecode)
			var checkedPE *instance.PayloadError
			require.ErrorAs(t, checked, &checkedPE)
			require.Equal(t, id, checkedPE.SuspendID)
			require.Equal(t, tc.message, checkedPE.Message())
			require.Equal(t, "instance: suspension "+id+": "+tc.message, checkedPE.Error())
			var pe *instance.PayloadError
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, id, pe.SuspendID)
			require.Equal(t, tc.message, pe.Message())
			require.Equal(t, data, marshal(t, m), "a rejected payload leaves the machine byte-identical")
			requireUnchanged(t, before, m)
			require.Equal(t, 1, model.Calls())

			// Still pending, and a good payload resumes it.
			steps := run(t, m, machine.ResumeInput{SuspendID: id, Payload: decision{Approved: true}})
			require.Equal(t, machine.EndTurn, steps[len(steps)-1].Reason)
			require.Empty(t, m.Pending())
			require.Equal(t, `{"approved":true}`, lastToolResults(model.Requests()[1].Messages)[0].Text)
		})
	}
}

func TestTypedResumeOneBadPayloadFailsTheBatch(t *testing.T) {
	model := scripted.New(scripted.Tools(scripted.Call{Name: "ask", Input: askIn{"a"}}, scripted.Call{Name: "free", Input: askIn{"b"}}), scripted.Text("sorry"))
	m := newMachine(t, charter(t, model, typedDesk(t)), "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	require.Len(t, ids, 2)
	data := marshal(t, m)
	free := machine.ResumeInput{SuspendID: ids[1], Payload: "anything goes here"}
	_, err := collect(m.Run(context.Background(), free, machine.ResumeInput{SuspendID: ids[0], Payload: json.RawMessage(`{"approved":1}`)}))
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
	require.Equal(t, data, marshal(t, m))
	require.Len(t, m.Pending(), 2)

	// An error payload stays free-form.
	run(t, m, free, machine.ResumeInput{SuspendID: ids[0], Payload: "manager unreachable", IsError: true})
	results := lastToolResults(model.Requests()[1].Messages)
	require.Equal(t, []string{"manager unreachable", "anything goes here"}, texts(results))
	require.True(t, results[0].IsError)
}

func TestTypedResumeThroughCommand(t *testing.T) {
	type grantIn struct {
		ID      string `json:"id"`
		Payload any    `json:"payload"`
	}
	m, model, id := typedSuspended(t, scripted.Text("done"))
	data := marshal(t, m)
	_, err := collect(m.Run(context.Background(), command.Invoke("grant", grantIn{ID: id, Payload: json.RawMessage(`{"approved":"yes"}`)})))
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
	require.ErrorContains(t, err, "payload: approved: expected boolean, got string")
	require.Equal(t, data, marshal(t, m), "the failed command changed nothing")
	require.Len(t, m.Pending(), 1)

	steps := run(t, m, command.Invoke("grant", grantIn{ID: id, Payload: json.RawMessage(`{"approved":false,"note":"too much"}`)}))
	require.Equal(t, "granted", steps[0].Command.Value)
	require.Equal(t, `{"approved":false,"note":"too much"}`, lastToolResults(model.Requests()[1].Messages)[0].Text)
}

func TestTypedCommandSuspension(t *testing.T) {
	signOff := command.New("sign_off", "wait for a sign-off", func(ctx *command.Context[counter], _ empty) (string, error) {
		return "", ctx.Suspend("sign-off")
	}, command.ResumeWith[decision]())
	n := mustNode(t, "desk", node.Config[counter]{Commands: []command.Command[counter]{signOff}})
	m := newMachine(t, charter(t, scripted.New(), n), "desk")
	steps := run(t, m, command.Invoke("sign_off", nil))
	call := steps[0].Command.Suspension
	require.NotNil(t, call)
	require.JSONEq(t, decisionSchema, string(call.PayloadSchema))

	data := marshal(t, m)
	_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: call.SuspendID, Payload: "yes"}))
	var pe *instance.PayloadError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, data, marshal(t, m))

	steps = run(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: json.RawMessage(`{"approved":true}`)})
	require.Equal(t, json.RawMessage(`{"approved":true}`), steps[0].Command.Value)
	require.Empty(t, m.Pending())
}

func TestTypedResumeOnTimeoutPayloadCheckedAtSuspend(t *testing.T) {
	for _, tc := range []struct {
		name           string
		payload        any
		isError, fails bool
	}{
		{name: "bad", payload: "auto-approved", fails: true},
		{name: "good", payload: decision{Approved: false, Note: "timed out"}},
		{name: "error payloads are free-form", payload: "timed out", isError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := typedDesk(t, instance.WithTimeout(time.Hour), instance.OnTimeoutResume(tc.payload, tc.isError))
			model := scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Text("ok"))
			m := newMachine(t, charter(t, model, n), "desk")
			run(t, m, machine.UserText("go"))
			if !tc.fails {
				require.Len(t, m.Pending(), 1)
				return
			}
			require.Empty(t, m.Pending(), "the tool failed instead of suspending")
			res := lastToolResults(model.Requests()[1].Messages)[0]
			require.True(t, res.IsError)
			require.Contains(t, res.Text, "on-timeout payload")
			require.Contains(t, res.Text, "payload: expected object, got string")
		})
	}
}

func TestTypedResumeHandlerStagesKeepTheSchema(t *testing.T) {
	ask := node.NewTool("ask", "two-stage approval", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("stage 1")
	}, node.ResumeWith[decision](), node.OnResume(func(ctx *node.ToolContext[counter], in askIn, r node.Resumed[json.RawMessage]) (string, error) {
		d, err := instance.Decode[decision](r.Payload)
		if err != nil {
			return "", err
		}
		if r.Stage == 0 && d.Approved {
			return "", ctx.Suspend("stage 2")
		}
		return "decided: " + d.Note, nil
	}))
	n := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{ask}})
	model := scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, n), "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	steps := run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: decision{Approved: true}})
	second := steps[len(steps)-1].Suspensions
	require.Len(t, second, 1)
	require.Equal(t, 1, second[0].Stage)
	require.JSONEq(t, decisionSchema, string(second[0].PayloadSchema))
	_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: second[0].SuspendID, Payload: "ok"}))
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
	run(t, m, machine.ResumeInput{SuspendID: second[0].SuspendID, Payload: decision{Approved: true, Note: "both"}})
	require.Equal(t, "decided: both", lastToolResults(model.Requests()[1].Messages)[0].Text)
}

func TestResumeWithBadType(t *testing.T) {
	_, err := node.New("desk", node.Config[counter]{Tools: []node.Tool[counter]{
		askTool[counter]("ask", node.ResumeWith[chan int]()),
	}})
	require.ErrorIs(t, err, node.ErrInvalidNode)
	require.ErrorContains(t, err, "ResumeWith")
	_, err = node.New("desk", node.Config[counter]{Commands: []command.Command[counter]{
		command.New("c", "", func(*command.Context[counter], empty) (string, error) { return "", nil }, command.ResumeWith[func()]()),
	}})
	require.ErrorIs(t, err, node.ErrInvalidNode)
}

// TestTypedResumeHandler: OnResume's handler receives the payload decoded
// into its type and why the call was resolved, whatever resolved it; its
// payload type is the call's schema.
func TestTypedResumeHandler(t *testing.T) {
	type seen struct {
		Payload decision
		Cause   instance.Cause
		By      string
		Signal  string
		Command string
		IsError bool
		Text    string
	}
	const timeout = time.Hour
	cases := []struct {
		name  string
		input func(id string) machine.Input
		clock time.Duration // advanced before the input
		want  seen
	}{
		{"decision", func(id string) machine.Input {
			return machine.ResumeInput{SuspendID: id, Payload: decision{Approved: true, Note: "ok"}, By: "ann"}
		}, 0, seen{Payload: decision{Approved: true, Note: "ok"}, Cause: instance.CauseExplicit, By: "ann"}},
		{"command", func(id string) machine.Input {
			return command.Invoke("grant", map[string]any{"id": id, "payload": map[string]any{"approved": false}})
		}, 0, seen{Cause: instance.CauseCommand, Command: "grant"}},
		{"signal", func(string) machine.Input {
			return machine.SignalInput{Event: "manager", Payload: decision{Approved: true}}
		}, 0, seen{Payload: decision{Approved: true}, Cause: instance.CauseEvent, Signal: "manager"}},
		{"timeout", func(string) machine.Input { return nil }, 2 * timeout,
			seen{Payload: decision{Note: "timed out"}, Cause: instance.CauseTimeout}},
		{"error", func(id string) machine.Input {
			return machine.ResumeInput{SuspendID: id, Payload: "the manager is away", IsError: true}
		}, 0, seen{Cause: instance.CauseExplicit, IsError: true, Text: "the manager is away"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []seen
			ask := node.NewTool("ask", "ask a manager", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
				return "", ctx.Suspend("approve "+in.What, instance.WithEvent("manager"),
					instance.WithTimeout(timeout), instance.OnTimeoutResume(decision{Note: "timed out"}, false))
			}, node.OnResume(func(ctx *node.ToolContext[counter], in askIn, r node.Resumed[decision]) (string, error) {
				got = append(got, seen{r.Payload, r.Cause, r.By, r.Signal, r.Command, r.IsError, ""})
				if r.IsError {
					got[len(got)-1].Text = r.Text()
				}
				return "decided", nil
			}))
			grant := command.New("grant", "resolve a suspension", func(ctx *command.Context[counter], in struct {
				ID      string `json:"id"`
				Payload any    `json:"payload"`
			}) (string, error) {
				return "granted", ctx.Resume(in.ID, in.Payload)
			})
			desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{ask}, Commands: []command.Command[counter]{grant}})
			clock := newClock()
			model := scripted.New(scripted.Tool("ask", askIn{"refund"}), scripted.Text("done"))
			m := newMachine(t, charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}, Clock: clock.Now}), "desk")
			ids := pendingIDs(run(t, m, machine.UserText("refund order 42")))
			require.Len(t, ids, 1)
			require.JSONEq(t, decisionSchema, string(m.Pending()[0].PayloadSchema), "OnResume[decision] declares the schema")

			// A payload that does not fit the handler's type is refused
			// before the call is consumed.
			before := marshal(t, m)
			_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: ids[0], Payload: map[string]any{"approved": "yes"}}))
			var pe *instance.PayloadError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, before, marshal(t, m))
			require.Empty(t, got)

			clock.Advance(tc.clock)
			var inputs []machine.Input
			if in := tc.input(ids[0]); in != nil {
				inputs = append(inputs, in)
			}
			run(t, m, inputs...)
			require.Equal(t, []seen{tc.want}, got)
			require.Empty(t, m.Pending())
		})
	}
}

// TestResumePayloadDeclaredTwice: a tool that declares two different
// payload types is refused when its node is built; the same type twice is
// fine.
func TestResumePayloadDeclaredTwice(t *testing.T) {
	handler := node.OnResume(func(*node.ToolContext[counter], askIn, node.Resumed[decision]) (string, error) { return "", nil })
	build := func(opts ...node.ToolOption) error {
		_, err := node.New("desk", node.Config[counter]{Tools: []node.Tool[counter]{askTool[counter]("ask", opts...)}})
		return err
	}
	require.ErrorIs(t, build(handler, node.ResumeWith[string]()), node.ErrInvalidNode)
	require.ErrorIs(t, build(node.ResumeWith[string](), handler), node.ErrInvalidNode)
	require.NoError(t, build(node.ResumeWith[decision](), handler))
	raw := node.OnResume(func(*node.ToolContext[counter], askIn, node.Resumed[json.RawMessage]) (string, error) { return "", nil })
	require.NoError(t, build(node.ResumeWith[decision](), raw), "a raw handler declares nothing")
}
