package machine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

// approveAll decides every call named in names with payload, as rule
// "auto", and counts what it was asked.
type approveAll struct {
	names   []string
	payload string
	asked   int
}

func (d *approveAll) Decide(_ context.Context, _ string, call *instance.SuspendedCall) (string, json.RawMessage, bool) {
	d.asked++
	for _, n := range d.names {
		if n == call.Name {
			b, _ := json.Marshal(d.payload)
			return "auto", b, true
		}
	}
	return "", nil, false
}

// A tool call the decider decides is resolved in the round that suspends
// it: the run goes on to the model's next reply, no step suspends, and
// the decision names the rule.
func TestDeciderTool(t *testing.T) {
	n := mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{askTool[counter]("ask")}})
	model := scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Text("thanks"))
	m := newMachine(t, charter(t, model, n), "desk")
	d := &approveAll{names: []string{"ask"}, payload: "yes"}
	m.SetDecider(d)
	steps := run(t, m, machine.UserText("go"))
	require.Equal(t, 1, d.asked)
	require.Empty(t, m.Pending())
	require.Equal(t, 2, model.Calls())
	for _, s := range steps {
		require.NotEqual(t, machine.Suspend, s.Reason)
	}
	ds := m.TakeDecisions()
	require.Len(t, ds, 1)
	require.Equal(t, "auto", ds[0].Decision.Rule)
	require.Equal(t, machine.RuleBy+"auto", ds[0].Decision.By)
	require.Equal(t, machine.DecisionApproved, ds[0].Outcome)
	var resumed []instance.Event
	for _, s := range steps {
		for _, e := range s.Events {
			if e.Type == instance.EventResumed {
				resumed = append(resumed, e)
			}
		}
	}
	require.Len(t, resumed, 1)
	require.Equal(t, machine.RuleBy+"auto", resumed[0].By)
}

// A command's suspension the decider decides resolves in the same
// apply; one it declines waits.
func TestDeciderCommand(t *testing.T) {
	type signIn struct {
		Doc string `json:"doc"`
	}
	sign := command.New("sign", "get a signature", func(ctx *command.Context[counter], in signIn) (string, error) {
		return "", ctx.Suspend("awaiting signature on " + in.Doc)
	})
	n := mustNode(t, "desk", node.Config[counter]{Commands: []command.Command[counter]{sign}})
	m := newMachine(t, charter(t, scripted.New(), n), "desk")
	m.SetDecider(&approveAll{names: []string{"sign"}, payload: "signed by the rule"})
	steps := run(t, m, command.Invoke("sign", signIn{"nda"}))
	require.Empty(t, m.Pending())
	var values []any
	for _, s := range steps {
		if s.Command != nil && s.Command.Value != nil {
			values = append(values, s.Command.Value)
		}
	}
	require.Equal(t, []any{json.RawMessage(`"signed by the rule"`)}, values)

	m.SetDecider(&approveAll{})
	run(t, m, command.Invoke("sign", signIn{"contract"}))
	require.Len(t, m.Pending(), 1)
}
