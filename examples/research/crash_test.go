package main

import (
	"testing"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/machine"
)

// TestCrashAnywhere runs the example's question durably under the crash
// kit: the lead dispatches two concurrent researchers, each searches and
// cedes, and the lead summarizes. A SIGKILL at any crash point — rounds
// of the concurrent workers among them — and a restart end as the
// uncrashed run. The charter's IDs are random, as in production: the
// demo's readable ones, counted in one process, repeat after a restart.
func TestCrashAnywhere(t *testing.T) {
	rep := durabletest.Run(t, durabletest.Scenario{
		Charter:  func(durabletest.Env) (*machine.Charter, error) { return newCharter(scriptedModel(), nil) },
		Store:    durabletest.SQLite,
		Root:     leadNode,
		Messages: []string{question},
	})
	t.Logf("%d crash points", len(rep.Points))
}
