package tour

import (
	"testing"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// TestCrashAnywhere runs the tour's conversation durably under the crash
// kit — the refund request, then the manager's approval — on TestTour's
// replies, given from the request (a restarted process's fresh model
// answers where the conversation is), and kills it at every crash point.
func TestCrashAnywhere(t *testing.T) {
	model := func() llm.Model {
		return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
			if req.Messages[len(req.Messages)-1].Role == message.Tool {
				return scripted.Text("Your refund for order 42 is approved."), nil
			}
			return scripted.Tool("request_refund", refund{OrderID: "42"}), nil
		})
	}
	rep := durabletest.Run(t, durabletest.Scenario{
		Charter: func(durabletest.Env) (*machine.Charter, error) { return NewCharter(model()), nil },
		Store:   durabletest.SQLite,
		Root:    "support",
		Turns: []durabletest.Turn{
			durabletest.Say("refund order 42"),
			durabletest.Resume("request_refund", approval{OK: true}),
		},
	})
	t.Logf("%d crash points", len(rep.Points))
}
