package main

import (
	"context"
	"testing"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
	"github.com/markov-agents/markov/machine"
)

// TestCrashAnywhere runs the example's conversation under the crash kit:
// the request, then the manager's approval with its run streamed as
// events (Run.Events), as the example streams; a SIGKILL at any crash
// point and a restart end as the uncrashed run.
func TestCrashAnywhere(t *testing.T) {
	streamed := durabletest.Do("approve, streamed", func(ctx context.Context, r *durable.Runner, _ durabletest.Env) error {
		c, err := durabletest.PendingCall(ctx, r, refund.ToolName)
		if err != nil {
			return err
		}
		run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: c.SuspendID, Payload: refundtest.Cases[0].Decision})
		if err != nil {
			return err
		}
		for _, err := range run.Events() {
			if err != nil {
				return err
			}
		}
		return nil
	})
	rep := durabletest.Run(t, refundtest.CrashScenario(durabletest.SQLite, streamed))
	t.Logf("%d crash points", len(rep.Points))
}
