package main

import (
	"testing"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/machine"
)

// TestCrashAnywhere runs the example's conversation durably under the
// crash kit — the set_customer command, then the user's question through
// the desk's note and transition to billing — and kills it at every crash
// point: the restart ends at billing with the desk's customer carried
// over and the note written once, as the uncrashed run.
func TestCrashAnywhere(t *testing.T) {
	rep := durabletest.Run(t, durabletest.Scenario{
		Charter: func(durabletest.Env) (*machine.Charter, error) { return NewCharter(ScriptedModel()) },
		Store:   durabletest.SQLite,
		Root:    "desk",
		Turns: []durabletest.Turn{
			durabletest.Invoke(command.Invoke("set_customer", map[string]string{"name": "ada"})),
			durabletest.Say("I was charged twice."),
		},
	})
	t.Logf("%d crash points", len(rep.Points))
}
