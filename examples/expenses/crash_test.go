package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/expenses/ledger"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/resumehttp"
)

// TestCrashAnywhere runs the example's whole conversation under the crash
// kit, on the kit's clock: the taxi, its malformed approval refused and
// bob's approval, both over signed HTTP; the server escalated to the
// senior node and withdrawn by command; the lunch expired by the sweeper
// 49 hours later. A SIGKILL at any crash point — the escalation's, the
// command's, the sweep's saves among them — and a restart end as the
// uncrashed run: the same ledger, each expense decided once, nothing
// pending, back at the assistant. Each save is tried once, the crash
// point's kind taken in turn, to keep the test short.
func TestCrashAnywhere(t *testing.T) {
	// testing:crashkit:begin
	rep := durabletest.Run(t, durabletest.Scenario{
		Charter: func(env durabletest.Env) (*machine.Charter, error) {
			return ledger.NewCharter(ledger.Model(), env.Now) // deadlines on the kit's clock
		},
		Store: durabletest.SQLite,
		Root:  ledger.Assistant,
		Turns: []durabletest.Turn{
			durabletest.Say("I spent $40 on a taxi to the client."),
			durabletest.Do("a malformed approval, then bob's, over signed HTTP", approveOverHTTP),
			durabletest.Say("I spent $5000 on a server for the lab."),
			durabletest.Invoke(command.Invoke("withdraw", ledger.ApprovalInput{ExpenseID: "e2"})),
			durabletest.Say("I spent $30 on a lunch with the team."),
			durabletest.Advance(ledger.ApprovalTimeout + time.Hour), // the clock moves, the sweeper runs
		},
		Points: durabletest.EachSaveOnce, // a long conversation: each save once, every kind
	})
	// testing:crashkit:end
	t.Logf("%d crash points", len(rep.Points))
}

// approveOverHTTP is the example's first phase's decisions: the webhook
// client sends a malformed approval, refused with 400, then bob's, to the
// approval service over the kit's runner, both signed on the kit's clock.
func approveOverHTTP(ctx context.Context, r *durable.Runner, env durabletest.Env) error {
	srv, err := approvalService(r, env.Now)
	if err != nil {
		return err
	}
	defer srv.Close()
	c, err := durabletest.PendingCall(ctx, r, "request_approval")
	if err != nil {
		return err
	}
	id := c.SuspendID
	var refused resumehttp.ErrorBody
	if status, err := decide(srv.URL, id, env.Now, map[string]any{"approved": "yes"}, &refused); err != nil || status != http.StatusBadRequest {
		return fmt.Errorf("the malformed approval: %d %v", status, err)
	}
	if status, err := decide(srv.URL, id, env.Now, ledger.Approval{Approved: true, Manager: "bob"}, nil); err != nil || status != http.StatusOK {
		return fmt.Errorf("bob's approval: %d %v", status, err)
	}
	return nil
}
