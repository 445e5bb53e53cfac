package durable_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// verdict is the payload the typed approval accepts.
type verdict struct {
	Approved bool `json:"approved"`
}

// typedRunner returns a runner whose "ask" tool takes a verdict on resume,
// and a machine "m1" suspended on it.
func typedRunner(t *testing.T, s store.Store) (*durable.Runner, string) {
	t.Helper()
	ask := node.NewTool("ask", "ask for approval", func(ctx *node.ToolContext[desk], _ empty) (string, error) {
		return "", ctx.Suspend("approval")
	}, node.ResumeWith[verdict]())
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{ask}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("ask", empty{}), scripted.Text("approved, thanks")),
		Nodes: []*node.Node{n},
	})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c})
	require.NoError(t, err)
	return r, suspended(t, r, "m1")
}

func TestTypedResumeRejectedChangesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r, id := typedRunner(t, s)
		call, err := r.Call(ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, `{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"],"additionalProperties":false}`,
			string(call.PayloadSchema))

		before, err := s.Load(ctx, "m1")
		require.NoError(t, err)
		// Refused at check-in: an error, no run.
		run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: json.RawMessage(`{"approved":"yes"}`)})
		require.Nil(t, run)
		var pe *instance.PayloadError
		require.ErrorAs(t, err, &pe)
		require.ErrorIs(t, err, instance.ErrPayloadDecode)
		require.Equal(t, "payload: approved: expected boolean, got string", pe.Message())
		after, err := s.Load(ctx, "m1")
		require.NoError(t, err)
		require.Equal(t, before, after, "the stored snapshot is byte-identical")
		sus, err := r.Suspension(ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, sus.Status)

		steps, err := runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: verdict{Approved: true}}))
		require.NoError(t, err)
		require.Equal(t, machine.EndTurn, steps[len(steps)-1].Reason)
		_, err = r.Call(ctx, id)
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
		_, err = r.Call(ctx, "nope")
		require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
	})
}

// TestResumeChecksIn checks that Resume refuses, before any run and
// changing nothing, what a run would refuse — and that a race lost after
// the check surfaces from the run, with nothing run.
func TestResumeChecksIn(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r, id := typedRunner(t, s)
		before, err := s.Load(ctx, "m1")
		require.NoError(t, err)
		for _, tc := range []struct {
			in   machine.ResumeInput
			want error
		}{
			{machine.ResumeInput{SuspendID: "nope", Payload: verdict{}}, instance.ErrUnknownSuspendID},
			{machine.ResumeInput{SuspendID: id}, instance.ErrPayloadDecode},
			{machine.ResumeInput{SuspendID: id, Payload: "yes"}, instance.ErrPayloadDecode},
		} {
			run, err := r.Resume(ctx, tc.in)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, run)
		}
		after, err := s.Load(ctx, "m1")
		require.NoError(t, err)
		require.Equal(t, before, after, "nothing changed")

		// Two check-ins pass; the first run wins, the second finds the
		// suspension resolved and runs nothing.
		first, err := r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: verdict{Approved: true}})
		require.NoError(t, err)
		second, err := r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: verdict{Approved: false}})
		require.NoError(t, err)
		require.Equal(t, "m1", second.MachineID())
		_, err = drain(first.Steps())
		require.NoError(t, err)
		for e, err := range second.Events() {
			if err == nil {
				t.Fatalf("the lost race yielded %v", e.Kind)
			}
			require.ErrorIs(t, err, durable.ErrRejected)
			require.ErrorIs(t, err, instance.ErrAlreadyResolved)
		}
		_, err = r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: verdict{}})
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
	})
}

// TestCancelInvokeDeadlineCheckIn checks the other check-ins: a resume
// past its deadline is refused (a cancellation is not), an unknown
// command or machine is refused by Invoke, all before any run.
func TestCancelInvokeDeadlineCheckIn(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clk := testkit.NewClock(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
		c, err := buildCharter(agentModel(0), func(cfg *machine.CharterConfig) { cfg.Clock = clk.Now })
		require.NoError(t, err)
		r, err := durable.New(durable.Config{Store: s, Charter: c})
		require.NoError(t, err)
		id := suspended(t, r, "late")
		clk.Advance(2 * time.Hour)
		run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "ok"})
		require.ErrorIs(t, err, machine.ErrDeadlinePassed)
		require.Nil(t, run)

		_, err = r.Invoke(ctx, "late", command.Invoke("nope", nil))
		require.ErrorIs(t, err, command.ErrUnknownCommand)
		_, err = r.Cancel(ctx, machine.CancelInput{SuspendID: "nope"})
		require.ErrorIs(t, err, instance.ErrUnknownSuspendID)

		run, err = r.Cancel(ctx, machine.CancelInput{SuspendID: id, Reason: "too late"})
		require.NoError(t, err, "a cancellation is accepted past the deadline")
		_, err = drain(run.Steps())
		require.NoError(t, err)
		_, err = r.Cancel(ctx, machine.CancelInput{SuspendID: id})
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
	})
}
