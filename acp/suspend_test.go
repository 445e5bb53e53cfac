package acp_test

import (
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/acp"
	"github.com/markov-agents/markov/acp/acpdemo"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// gate holds the second model call of a gated charter until released.
type gate struct {
	waiting chan struct{} // the second model call started
	release chan struct{}
	calling chan struct{} // a "slow" model call started
}

// gatedCharter is a charter whose model, asked to "go", calls work once,
// then — once released — work again, then says "finished"; asked to be
// "slow", it takes an hour (or until cancelled).
func gatedCharter(t *testing.T) (*machine.Charter, *gate) {
	g := &gate{waiting: make(chan struct{}, 1), release: make(chan struct{}), calling: make(chan struct{}, 1)}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		results := 0
		for _, m := range req.Messages {
			if m.Role == message.Tool {
				results++
			}
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == message.User && last.Text() == "slow":
			g.calling <- struct{}{}
			return scripted.Reply{Text: "too late", Latency: time.Hour}, nil
		case results == 0:
			return scripted.Tool("work", struct{}{}), nil
		case results == 1:
			g.waiting <- struct{}{}
			<-g.release
			return scripted.Tool("work", struct{}{}), nil
		}
		return scripted.Text("finished"), nil
	})
	work := node.NewTool("work", "work", func(*node.ToolContext[struct{}], struct{}) (string, error) { return "worked", nil })
	n, err := node.New("worker", node.Config[struct{}]{Tools: []node.Tool[struct{}]{work}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	return c, g
}

// TestSuspendModes suspends a session while its model is answering, in
// each mode: interrupt_immediate parks before the reply's tool runs,
// finish_step after the round, wait_for_completion after the turn. The
// resume runs what is left.
func TestSuspendModes(t *testing.T) {
	for _, tc := range []struct {
		mode         string
		rounds       int  // tool rounds before the park
		finished     bool // the turn's last reply before the park
		roundsOnWake int
		finishOnWake bool
	}{
		{mode: acp.ModeInterruptImmediate, rounds: 1, roundsOnWake: 1, finishOnWake: true},
		{mode: acp.ModeFinishStep, rounds: 2, finishOnWake: true},
		{mode: acp.ModeWaitForCompletion, rounds: 2, finished: true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			charter, g := gatedCharter(t)
			st := stores["sqlite"](t)
			h := serve(t, newRunner(t, st, charter), "worker")
			id := h.newSession()
			stop := make(chan acpsdk.StopReason, 1)
			go func() { stop <- h.prompt(id, "go") }()
			<-g.waiting
			var resp acp.SuspendResponse
			suspended := make(chan error, 1)
			go func() {
				suspended <- h.call(acp.MethodSuspend, map[string]any{"sessionId": id, "mode": tc.mode, "reason": "review"}, &resp)
			}()
			require.Eventually(t, func() bool {
				reqs, err := st.(store.SuspendRequester).SuspendRequests(h.ctx, id)
				return err == nil && len(reqs) == 1
			}, 10*time.Second, time.Millisecond, "the suspend request is kept for the run")
			close(g.release)
			require.Equal(t, acpsdk.StopReasonEndTurn, <-stop)
			require.NoError(t, <-suspended)
			lines := h.cl.take()
			require.Equal(t, tc.rounds, count(lines, "tool_call work in_progress"), "%q", lines)
			require.Equal(t, tc.finished, text(lines) == "finished", "%q", lines)
			require.Equal(t, 1, count(lines, "suspended client"), "%q", lines)
			require.NotEmpty(t, resp.Handle)
			require.Equal(t, "review", resp.Reason)
			require.Equal(t, tc.mode, resp.Meta["mode"])

			var res acp.ResumeResponse
			require.NoError(t, h.call(acp.MethodResume, map[string]any{"sessionId": id}, &res))
			require.Equal(t, resp.Handle, res.Handle)
			lines = h.cl.take()
			require.Equal(t, 1, count(lines, "resumed explicit_resume input=false continue=true"), "%q", lines)
			require.Equal(t, tc.roundsOnWake, count(lines, "tool_call_update completed"), "tools run on wake: %q", lines)
			require.Equal(t, tc.finishOnWake, text(lines) == "finished", "%q", lines)
		})
	}
}

// count is how many of lines are line.
func count(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if l == line {
			n++
		}
	}
	return n
}

func TestSuspendIdleResumeWithInputAndFreshTurn(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			h := serve(t, deskRunner(t, open(t)), acpdemo.NodeName)
			id := h.newSession()
			h.prompt(id, "hello")
			h.cl.take()
			var resp acp.SuspendResponse
			require.NoError(t, h.call(acp.MethodSuspend, map[string]any{
				"sessionId": id, "reason": "lunch",
				"resumeWhen": map[string]any{"timeout": map[string]any{"durationMinutes": 90, "onTimeout": "resume_with_summary"}},
			}, &resp))
			require.Equal(t, &acp.ResumeConditions{Timeout: &acp.ResumeTimeoutSpec{DurationMinutes: 90, OnTimeout: acp.OnTimeoutResumeWithSummary}}, resp.ResumeWhen)
			require.Equal(t, acp.ModeFinishStep, resp.Meta["mode"])
			require.Equal(t, []string{"suspended client"}, h.cl.take())

			// A second suspend parks it again; the resume wakes the latest.
			var res acp.ResumeResponse
			require.NoError(t, h.call(acp.MethodResume, map[string]any{"sessionId": id, "input": "carry on", "continueTranscript": false}, &res))
			require.Equal(t, resp.Handle, res.Handle)
			lines := h.cl.take()
			require.Equal(t, []string{"resumed explicit_resume input=true continue=false"}, kinds(lines))
			require.Equal(t, "Fresh turn. You said: carry on", text(lines))

			// Nothing is parked any more.
			err := h.call(acp.MethodResume, map[string]any{"sessionId": id}, nil)
			require.ErrorContains(t, err, "not suspended")
			// Bad params change nothing.
			require.Error(t, h.call(acp.MethodSuspend, map[string]any{"sessionId": id, "mode": "soon"}, nil))
			require.Error(t, h.call(acp.MethodSuspend, map[string]any{"sessionId": id, "resumeWhen": map[string]any{"onEvent": "bad\nname"}}, nil))
			require.Error(t, h.call(acp.MethodSuspend, map[string]any{"sessionId": "nope"}, nil))
			m, _, err := h.runner.Load(h.ctx, id)
			require.NoError(t, err)
			require.Empty(t, m.Pending())
		})
	}
}

// TestAwaitResumptionAndSignal parks a session on a tool that waits for
// an event, and wakes it with a signal from another runner on the same
// store (another process): the client is told with a resumed update and
// sees the reply that followed.
func TestAwaitResumptionAndSignal(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			h := serve(t, deskRunner(t, st), acpdemo.NodeName)
			id := h.newSession()
			require.Equal(t, acpsdk.StopReasonEndTurn, h.prompt(id, "wait ci.passed"))
			// The client handles requests concurrently with notifications:
			// await_resumption may come first.
			require.ElementsMatch(t, []string{
				"tool_call wait in_progress",
				"tool_call_update pending",
				"suspended agent",
				"await_resumption waiting for ci.passed",
			}, kinds(h.cl.take()))
			require.Len(t, h.cl.awaits, 1)
			require.Equal(t, &acp.ResumeConditions{OnEvent: "ci.passed"}, h.cl.awaits[0].Conditions)

			signalAndSeeResumed(t, h, st)
		})
	}
}

func TestCancelStopsThePrompt(t *testing.T) {
	charter, g := gatedCharter(t)
	h := serve(t, newRunner(t, stores["memstore"](t), charter), "worker")
	id := h.newSession()
	stop := make(chan acpsdk.StopReason, 1)
	go func() { stop <- h.prompt(id, "slow") }()
	<-g.calling
	require.NoError(t, h.conn.Cancel(h.ctx, acpsdk.CancelNotification{SessionId: acpsdk.SessionId(id)}))
	require.Equal(t, acpsdk.StopReasonCancelled, <-stop)
	// The session takes prompts again.
	close(g.release)
	require.Equal(t, acpsdk.StopReasonEndTurn, h.prompt(id, "go"))
}
