package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, Run(context.Background(), &out))
	require.Equal(t, `command set_customer: customer ada
billing: Billing here: I refunded the second charge of invoice 7.
now at billing with {Customer:ada Summary:charged twice for invoice 7}
notes: invoice 7 charged twice
`, out.String())
}

// TestTheDesksCommandsLeaveWithIt: after the transition the root runs
// billing, which declares no set_customer: invoking it is refused and
// changes nothing.
func TestTheDesksCommandsLeaveWithIt(t *testing.T) {
	ctx := context.Background()
	charter, err := NewCharter(ScriptedModel())
	require.NoError(t, err)
	m, err := charter.NewMachine("desk", nil)
	require.NoError(t, err)
	_, err = testkit.Collect(m.Run(ctx, machine.UserText("I was charged twice.")))
	require.NoError(t, err)
	require.Equal(t, "billing", m.Root().Node)

	_, err = testkit.Collect(m.Run(ctx, command.Invoke("set_customer", map[string]string{"name": "bob"})))
	require.ErrorIs(t, err, command.ErrUnknownCommand)
	require.Equal(t, Billing{Summary: "charged twice for invoice 7"}, m.Root().State)
}

// TestTheGraphShowsTheCodeTransition: node.Targets puts the code
// transition's edge on the charter's graph.
func TestTheGraphShowsTheCodeTransition(t *testing.T) {
	charter, err := NewCharter(ScriptedModel())
	require.NoError(t, err)
	g, err := charter.Graph(machine.GraphMermaid)
	require.NoError(t, err)
	require.Contains(t, g, "desk")
	require.Contains(t, g, "billing")
	require.Contains(t, g, "to_billing")
}
