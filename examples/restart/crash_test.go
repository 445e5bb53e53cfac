package main

import (
	"encoding/json"
	"testing"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
)

// TestCrashAnywhere runs the example's conversation — the request, then
// the second process's JSON decision — under the crash kit. The example
// parks the machine in a file it writes whole; the kit needs a store it
// can kill a process in the middle of, so the same charter and inputs run
// on SQLite, SIGKILLed at every crash point.
func TestCrashAnywhere(t *testing.T) {
	decision := json.RawMessage(`{"approved":true,"manager":"dana"}`)
	rep := durabletest.Run(t, refundtest.CrashScenario(durabletest.SQLite, durabletest.Resume(refund.ToolName, decision)))
	t.Logf("%d crash points", len(rep.Points))
}
