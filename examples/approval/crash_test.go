package main

import (
	"context"
	"errors"
	"testing"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// TestCrashAnywhere runs the example's conversation durably under the
// crash kit — the request, the malformed approval refused, the manager's
// approval — and kills it at every crash point: the restart ends as the
// uncrashed run, the refund issued once, nothing pending.
func TestCrashAnywhere(t *testing.T) {
	refused := durabletest.Do("a malformed approval", func(ctx context.Context, r *durable.Runner, _ durabletest.Env) error {
		c, err := durabletest.PendingCall(ctx, r, refund.ToolName)
		if err != nil {
			return err
		}
		_, err = r.Resume(ctx, machine.ResumeInput{SuspendID: c.SuspendID, Payload: map[string]string{"approved": "yes"}})
		if !errors.Is(err, instance.ErrPayloadDecode) {
			return errors.New("the malformed approval is not refused")
		}
		return nil
	})
	rep := durabletest.Run(t, refundtest.CrashScenario(durabletest.SQLite, refused, refundtest.Decide))
	t.Logf("%d crash points", len(rep.Points))
}
