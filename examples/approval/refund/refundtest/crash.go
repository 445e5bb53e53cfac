package refundtest

import (
	"testing"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// Decide is the refund conversation's decision turn: the manager of
// Cases[0] approves the pending refund.
var Decide = durabletest.Resume(refund.ToolName, Cases[0].Decision)

// CrashScenario is the refund conversation for the crash kit, on the
// scripted model and the stores open makes: the customer's request, then
// turns (Decide, or the example's own way to decide).
func CrashScenario(open func(testing.TB, durabletest.Env) store.Store, turns ...durabletest.Turn) durabletest.Scenario {
	return durabletest.Scenario{
		Charter: func(durabletest.Env) (*machine.Charter, error) {
			return refund.NewCharter(refund.ScriptedModel())
		},
		Store:    open,
		Root:     refund.NodeName,
		Messages: []string{refund.CustomerRequest},
		Turns:    turns,
	}
}
