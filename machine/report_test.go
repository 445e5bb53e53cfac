package machine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// TestResumeIsReportedAfterAFailedRound: what a resume released (the held
// reply, its results, the resumed event) reaches the first step that runs,
// even when the round right after the resume fails.
func TestResumeIsReportedAfterAFailedRound(t *testing.T) {
	errDown := errors.New("provider down")
	providerDown := func(context.CancelFunc) (scripted.Reply, error) { return scripted.Reply{Err: errDown}, nil }
	tests := []struct {
		name string
		// fail answers the second model call (the one after the resume).
		fail  func(cancel context.CancelFunc) (scripted.Reply, error)
		want  error
		apply bool
	}{
		{"provider error", providerDown, errDown, false},
		{"provider error after Apply", providerDown, errDown, true},
		{"context cancelled", func(cancel context.CancelFunc) (scripted.Reply, error) {
			cancel()
			return scripted.Reply{}, context.Canceled
		}, context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			model := scripted.Func(func(*llm.Request) (scripted.Reply, error) {
				calls++
				switch calls {
				case 1:
					return scripted.Tool("ask", askIn{"a"}), nil
				case 2:
					return tt.fail(cancel)
				}
				return scripted.Text("done"), nil
			})
			m := deskMachine(t, model)
			steps := run(t, m, machine.UserText("go"))
			held := steps[0].Held[0]
			resume := machine.ResumeInput{SuspendID: pendingIDs(steps)[0], Payload: "ok"}
			var err error
			if tt.apply {
				_, err = m.Apply(ctx, resume)
				require.NoError(t, err)
				_, err = collect(m.Run(ctx))
			} else {
				_, err = collect(m.Run(ctx, resume))
			}
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, 3, len(m.History()), "the resume itself was applied")

			steps = run(t, m)
			require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
			msgs := steps[0].Messages
			require.Len(t, msgs, 3)
			require.Equal(t, held.ToolUses(), msgs[0].ToolUses())
			require.Equal(t, message.Tool, msgs[1].Role)
			require.Equal(t, []string{"ok"}, texts(msgs[1].Parts))
			require.Equal(t, "done", msgs[2].Text())
			require.Len(t, steps[0].Events, 1)
			require.Equal(t, instance.EventResumed, steps[0].Events[0].Type)
			require.Equal(t, resume.SuspendID, steps[0].Events[0].SuspendID)
		})
	}
}

// TestHeldCedeIsReported: a cede held behind a suspension is applied on
// resume, and the step after the resume reports it.
func TestHeldCedeIsReported(t *testing.T) {
	lead := mustNode(t, "lead", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty]()}})
	worker := mustNode(t, "worker", node.Config[empty]{
		Worker: true, Tools: []node.Tool[empty]{askTool[empty]("ask")},
		Transitions: []node.Transition[empty]{node.Ceder[empty]("")},
	})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"lead": {scripted.Tool("spawn", spawnArgs{[]string{"worker"}}), scripted.Text("got the rows")},
		"worker": {scripted.Tools(
			scripted.Call{Name: "ask", Input: askIn{"data"}},
			scripted.Call{Name: "cede", Input: map[string]string{"content": "rows ready"}},
		)},
	})
	m := newMachine(t, charter(t, model, lead, worker), "lead")
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.Suspend}, reasons(steps))
	workerID := m.Root().Children[0].ID

	steps = run(t, m, machine.ResumeInput{SuspendID: pendingIDs(steps)[0], Payload: "rows"})
	require.Empty(t, m.Root().Children, "the held cede applied")
	require.Equal(t, []machine.YieldReason{machine.Cede}, reasons(steps))
	want := []machine.Ceded{{InstanceID: workerID, Node: "worker", To: m.Root().ID, Content: "rows ready"}}
	require.Equal(t, want, steps[0].Cedes)
	require.Equal(t, "rows ready", steps[0].CedeContent)
	require.Equal(t, "got the rows", steps[0].Messages[len(steps[0].Messages)-1].Text())
}
