package main

import (
	"testing"
	"time"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/machine"
)

// TestCrashAnywhere runs the example's conversation under the crash kit:
// the expense filed, then the approval window passed on the scenario's
// clock and swept. A SIGKILL at any crash point — the filing's saves, the
// sweep's — and a restart from the store end as the uncrashed run: the
// expense rejected once, by the deadline, nothing left pending.
func TestCrashAnywhere(t *testing.T) {
	rep := durabletest.Run(t, durabletest.Scenario{
		Charter: func(env durabletest.Env) (*machine.Charter, error) {
			return NewCharter(ScriptedModel(), env.Now)
		},
		Store: durabletest.SQLite,
		Root:  NodeName,
		Turns: []durabletest.Turn{
			durabletest.Say("File my 420 € conference ticket."),
			durabletest.Advance(ApprovalWindow + time.Minute),
		},
	})
	t.Logf("%d crash points", len(rep.Points))
}
