package machine_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

// A tool that outlives its timeout becomes an error result the model sees,
// the round goes on, and a handler that ignores its context is abandoned:
// its late writes and result are discarded.
func TestToolTimeout(t *testing.T) {
	const d = 20 * time.Millisecond
	release, finished := make(chan struct{}), make(chan struct{})
	never := make(chan struct{}) // never closed
	stall := node.NewTool("stall", "ignores its context, writes after it is released",
		func(ctx *node.ToolContext[counter], _ empty) (string, error) {
			defer close(finished)
			<-release
			if err := ctx.Update(func(c *counter) { c.Count = 99 }); err != nil {
				return "", err
			}
			return "late", nil
		}, node.Timeout(d))
	polite := node.NewTool("polite", "honours its context",
		func(ctx *node.ToolContext[counter], _ empty) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, node.Timeout(d))
	stuck := node.NewTool("stuck", "blocks for ever, under the charter's default",
		func(*node.ToolContext[counter], empty) (string, error) {
			<-never
			return "never", nil
		})
	quick := node.NewTool("quick", "returns in time",
		func(ctx *node.ToolContext[counter], _ empty) (string, error) {
			return "quick", ctx.Update(func(c *counter) { c.Count++ })
		}, node.Timeout(time.Hour))
	n := mustNode(t, "n", node.Config[counter]{Tools: []node.Tool[counter]{stall, polite, stuck, quick}})

	calls := 0
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		calls++
		if calls == 1 {
			return scripted.Tools(scripted.Call{Name: "stall"}, scripted.Call{Name: "polite"},
				scripted.Call{Name: "stuck"}, scripted.Call{Name: "quick"}), nil
		}
		// The abandoned handler runs on while the machine goes on.
		close(release)
		<-finished
		return scripted.Text("done"), nil
	})
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, ToolTimeout: 2 * d})
	m := newMachine(t, c, "n")
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.EndTurn}, reasons(steps))

	res := lastToolResults(m.History())
	require.Equal(t, []string{
		"tool stall timed out after 20ms",
		"tool polite timed out after 20ms",
		"tool stuck timed out after 40ms",
		"quick",
	}, texts(res))
	for i, want := range []bool{true, true, true, false} {
		require.Equal(t, want, res[i].IsError, res[i].Text)
	}
	require.Equal(t, counter{Count: 1}, m.Root().State, "only the tool that returned in time wrote")
	require.Equal(t, "done", m.History()[len(m.History())-1].Text())
}

func TestTimeoutMustBePositive(t *testing.T) {
	tool := node.NewTool("t", "", func(*node.ToolContext[counter], empty) (string, error) { return "", nil }, node.Timeout(0))
	_, err := node.New("n", node.Config[counter]{Tools: []node.Tool[counter]{tool}})
	require.ErrorIs(t, err, node.ErrInvalidNode)
}

// A resume handler runs under its tool's timeout too. The timeout is long
// enough that the first call, which only suspends, never meets it on a
// loaded machine.
func TestResumeHandlerTimeout(t *testing.T) {
	never := make(chan struct{}) // never closed
	wait := node.NewTool("wait", "suspends; its resume handler blocks for ever",
		func(ctx *node.ToolContext[counter], _ empty) (string, error) {
			return "", ctx.Suspend("waiting")
		}, node.Timeout(time.Second), node.OnResume(func(*node.ToolContext[counter], empty, node.Resumed[json.RawMessage]) (string, error) {
			<-never
			return "never", nil
		}))
	n := mustNode(t, "n", node.Config[counter]{Tools: []node.Tool[counter]{wait}})
	m := newMachine(t, charter(t, scripted.New(scripted.Tool("wait", nil), scripted.Text("done")), n), "n")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	require.Len(t, ids, 1)
	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "ok"})
	res := lastToolResults(m.History())
	require.Equal(t, []string{"tool wait timed out after 1s"}, texts(res))
	require.True(t, res[0].IsError)
	require.Empty(t, m.Pending())
}
