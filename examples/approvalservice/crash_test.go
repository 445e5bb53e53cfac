package main

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
	"github.com/markov-agents/markov/resumehttp"
)

// TestCrashAnywhere runs the service's conversation under the crash kit:
// the request, then the manager's approval signed and sent by the
// example's Client to resumehttp's endpoint over the kit's runner, in the
// child as in the restart. A SIGKILL at any crash point — the saves of
// the run the HTTP resume starts among them — and a restart end as the
// uncrashed run.
func TestCrashAnywhere(t *testing.T) {
	secret := []byte("crash-kit-approvals-secret-32-by")
	overHTTP := durabletest.Do("approve over signed HTTP", func(ctx context.Context, r *durable.Runner, _ durabletest.Env) error {
		h, err := resumehttp.New(resumehttp.Config{Runner: r, Secret: secret})
		if err != nil {
			return err
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		c, err := durabletest.PendingCall(ctx, r, refund.ToolName)
		if err != nil {
			return err
		}
		_, err = Client{BaseURL: srv.URL, Secret: secret}.Resume(ctx, c.SuspendID, refundtest.Cases[0].Decision)
		return err
	})
	rep := durabletest.Run(t, refundtest.CrashScenario(durabletest.SQLite, overHTTP))
	t.Logf("%d crash points", len(rep.Points))
}
