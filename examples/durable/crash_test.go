package main

import (
	"testing"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
)

// TestCrashAnywhere runs the example's conversation under the crash kit on
// its store, SQLite: the request, then the manager's decision, which the
// example's second process sends by suspension ID, here sent after a
// SIGKILL at each crash point by the restart on the same file.
func TestCrashAnywhere(t *testing.T) {
	rep := durabletest.Run(t, refundtest.CrashScenario(durabletest.SQLite, refundtest.Decide))
	t.Logf("%d crash points", len(rep.Points))
}
