package machine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

type ledger struct {
	Items []string          `json:"items"`
	Notes map[string]string `json:"notes"`
}

// scribble writes through the value State returned, in place, without
// Update.
func scribble(s ledger) {
	s.Items[0] = "forged"
	s.Notes["status"] = "approved"
}

func ledgerMachine(t *testing.T, model *scripted.Model) *machine.Machine {
	t.Helper()
	failing := command.New("forge", "writes in place, then fails", func(ctx *command.Context[ledger], _ empty) (string, error) {
		scribble(ctx.State())
		return "", errRefused
	})
	quiet := command.New("peek", "writes in place, then succeeds without Update", func(ctx *command.Context[ledger], _ empty) (string, error) {
		scribble(ctx.State())
		return "looked", nil
	})
	tool := node.NewTool("scribble", "writes in place, then fails", func(ctx *node.ToolContext[ledger], _ empty) (string, error) {
		scribble(ctx.State())
		return "", errRefused
	})
	n := mustNode(t, "books", node.Config[ledger]{
		Initial:  ledger{Items: []string{"first"}, Notes: map[string]string{"status": "pending"}},
		Commands: []command.Command[ledger]{failing, quiet},
		Tools:    []node.Tool[ledger]{tool},
	})
	return newMachine(t, charter(t, model, n), "books")
}

// A handler gets a copy of the state: an in-place write through what
// State returned never reaches the machine, whether the handler fails or
// not.
func TestInPlaceWritesAreNotKept(t *testing.T) {
	initial := ledger{Items: []string{"first"}, Notes: map[string]string{"status": "pending"}}
	t.Run("failed command", func(t *testing.T) {
		m := ledgerMachine(t, scripted.New())
		before := marshal(t, m)
		_, err := collect(m.Run(context.Background(), command.Invoke("forge", nil)))
		require.ErrorIs(t, err, errRefused)
		require.Equal(t, before, marshal(t, m))
		require.Equal(t, initial, m.Root().State)
	})
	t.Run("command without Update", func(t *testing.T) {
		m := ledgerMachine(t, scripted.New())
		run(t, m, command.Invoke("peek", nil))
		require.Equal(t, initial, m.Root().State)
	})
	t.Run("failed tool", func(t *testing.T) {
		m := ledgerMachine(t, scripted.New(scripted.Tool("scribble", nil), scripted.Text("done")))
		run(t, m, machine.UserText("go"))
		require.Equal(t, initial, m.Root().State)
		res := lastToolResults(m.History())
		require.True(t, res[0].IsError)
		require.Contains(t, res[0].Text, errRefused.Error())
	})
}
