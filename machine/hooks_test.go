package machine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

// hookDesk returns a machine at a desk under hooks, whose tool "act"
// suspends, or with fail returns the error text refusal instead.
func hookDesk(t *testing.T, hooks machine.Hooks, fail bool, replies ...scripted.Reply) *machine.Machine {
	t.Helper()
	act := node.NewTool("act", "act", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		if fail {
			return "", errors.New(refusal)
		}
		return "", ctx.Suspend("asking about " + in.What)
	})
	park := command.New("park", "wait for a person", func(ctx *command.Context[counter], _ empty) (string, error) {
		return "", ctx.Suspend("parked")
	})
	desk := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{act},
		Commands: []command.Command[counter]{park}})
	c := charterCfg(t, machine.CharterConfig{Model: scripted.New(replies...), Nodes: []*node.Node{desk},
		Hooks: hooks, Clock: newClock().Now})
	return newMachine(t, c, "desk")
}

const refusal = "machine: suspension refused: no approvals on Sundays"

// TestOnSuspendRefuses: a refused suspension is the tool's error result
// and nothing else — the machine is byte-identical to one whose tool
// returned that error — and a refused command or caller's suspend fails
// and changes nothing.
func TestOnSuspendRefuses(t *testing.T) {
	var seen []string
	hooks := machine.Hooks{OnSuspend: func(_ context.Context, node string, c *instance.SuspendedCall) error {
		seen = append(seen, node+"/"+string(c.Kind)+"/"+c.Name+"/"+c.Reason)
		return errors.New("no approvals on Sundays")
	}}
	refused := hookDesk(t, hooks, false, scripted.Tool("act", askIn{"refund"}), scripted.Text("ok"))
	run(t, refused, machine.UserText("go"))
	require.Empty(t, refused.Pending())
	require.Equal(t, []string{"desk/tool/act/asking about refund"}, seen)

	failed := hookDesk(t, machine.Hooks{}, true, scripted.Tool("act", askIn{"refund"}), scripted.Text("ok"))
	run(t, failed, machine.UserText("go"))
	require.Equal(t, marshal(t, failed), marshal(t, refused))

	before := marshal(t, refused)
	_, err := collect(refused.Run(context.Background(), command.Invoke("park", empty{})))
	require.ErrorIs(t, err, machine.ErrSuspendRefused)
	_, err = refused.Suspend("a pause")
	require.ErrorIs(t, err, machine.ErrSuspendRefused)
	require.Equal(t, before, marshal(t, refused))
	require.Len(t, seen, 3)
}

// TestOnSuspendMetadataAndFailures: the hook's metadata is on the
// suspension; a hook that panics or outlives its timeout refuses.
func TestOnSuspendMetadataAndFailures(t *testing.T) {
	m := hookDesk(t, machine.Hooks{OnSuspend: func(_ context.Context, _ string, c *instance.SuspendedCall) error {
		c.Metadata = []byte(`{"ticket":"OPS-7"}`)
		c.Reason = "ignored"
		return nil
	}}, false, scripted.Tool("act", askIn{"refund"}))
	run(t, m, machine.UserText("go"))
	require.Len(t, m.Pending(), 1)
	require.JSONEq(t, `{"ticket":"OPS-7"}`, string(m.Pending()[0].Metadata))
	require.Equal(t, "asking about refund", m.Pending()[0].Reason)

	release := make(chan struct{})
	defer close(release)
	for name, hooks := range map[string]machine.Hooks{
		"panic": {OnSuspend: func(context.Context, string, *instance.SuspendedCall) error { panic("boom") }},
		"hang": {Timeout: time.Millisecond, OnSuspend: func(context.Context, string, *instance.SuspendedCall) error {
			<-release
			return nil
		}},
	} {
		t.Run(name, func(t *testing.T) {
			m := hookDesk(t, hooks, false, scripted.Tool("act", askIn{"refund"}), scripted.Text("ok"))
			steps := run(t, m, machine.UserText("go"))
			require.Empty(t, m.Pending())
			require.Contains(t, steps[0].Messages[len(steps[0].Messages)-1].Parts[0].Text, "suspension refused")
		})
	}
}

// TestOnResolved: the hook hears every resolution once, with its cause
// and decider, and nothing of a batch of inputs that failed.
func TestOnResolved(t *testing.T) {
	var mu sync.Mutex
	var seen []instance.Event
	hooks := machine.Hooks{OnResolved: func(_ context.Context, e instance.Event) {
		mu.Lock()
		defer mu.Unlock()
		e.At = time.Time{}
		seen = append(seen, e)
	}}
	m := hookDesk(t, hooks, false, scripted.Tools(scripted.Call{ID: "u1", Name: "act", Input: askIn{"a"}}, scripted.Call{ID: "u2", Name: "act", Input: askIn{"b"}}), scripted.Text("ok"))
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	require.Len(t, ids, 2)

	_, err := collect(m.Run(context.Background(), machine.ResumeInput{SuspendID: ids[0], Payload: "yes", By: "ann"}, machine.ResumeInput{SuspendID: "nope"}))
	require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
	require.Empty(t, seen, "a failed batch resolves nothing")

	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "yes", By: "ann"}, machine.CancelInput{SuspendID: ids[1], By: "bob"})
	require.Equal(t, []instance.Event{
		{Type: instance.EventResumed, SuspendID: ids[0], InstanceID: m.Root().ID, Kind: instance.KindTool, Name: "act", Initiator: instance.ByTool, Cause: instance.CauseExplicit, HadPayload: true, By: "ann"},
		{Type: instance.EventCancelled, SuspendID: ids[1], InstanceID: m.Root().ID, Kind: instance.KindTool, Name: "act", Initiator: instance.ByTool, Cause: instance.CauseCancel, By: "bob"},
	}, seen)
}
