package main

import (
	"testing"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// TestCrashAnywhere runs the fleet's conversation under the crash kit on
// its store, PostgreSQL (MARKOV_TEST_POSTGRES; skipped without it, failed
// under CI): the request, then the manager's approval, SIGKILLed at every
// crash point, each in a schema of its own. The fleet's own machinery —
// River's jobs, workers killed mid-run, the server restarted — is
// durable/fleet's TestChaos; here it is the charter and its inputs that
// must survive the kill.
func TestCrashAnywhere(t *testing.T) {
	url := pgtest.URL(t)
	open := func(t testing.TB, env durabletest.Env) store.Store {
		schema := "fleetcrash_" + env.Name
		pgtest.DropAtEnd(t, url, schema)
		return pgtest.OpenIn(t, url, schema)
	}
	rep := durabletest.Run(t, refundtest.CrashScenario(open, refundtest.Decide))
	t.Logf("%d crash points", len(rep.Points))
}
