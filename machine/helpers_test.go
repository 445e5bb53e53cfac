package machine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// collect drains a run, returning its steps and its error.
var collect = testkit.Collect[machine.Step]

// run drains a run that must succeed.
func run(t *testing.T, m *machine.Machine, inputs ...machine.Input) []machine.Step {
	t.Helper()
	steps, err := collect(m.Run(context.Background(), inputs...))
	require.NoError(t, err)
	return steps
}

func reasons(steps []machine.Step) []machine.YieldReason {
	out := make([]machine.YieldReason, len(steps))
	for i, s := range steps {
		out[i] = s.Reason
	}
	return out
}

// ids returns a deterministic ID generator.
func ids() func() string {
	var n atomic.Int64
	return func() string { return fmt.Sprintf("id%d", n.Add(1)) }
}

// newClock returns a settable test clock.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// charter builds a charter with deterministic IDs around model and nodes.
func charter(t *testing.T, model llm.Model, nodes ...*node.Node) *machine.Charter {
	t.Helper()
	return charterCfg(t, machine.CharterConfig{Model: model, Nodes: nodes})
}

func charterCfg(t *testing.T, cfg machine.CharterConfig) *machine.Charter {
	t.Helper()
	if cfg.NewID == nil {
		cfg.NewID = ids()
	}
	c, err := machine.NewCharter(cfg)
	require.NoError(t, err)
	return c
}

func newMachine(t *testing.T, c *machine.Charter, root string) *machine.Machine {
	t.Helper()
	m, err := c.NewMachine(root, nil)
	require.NoError(t, err)
	return m
}

func mustNode[S any](t *testing.T, name string, cfg node.Config[S]) *node.Node {
	t.Helper()
	n, err := node.New(name, cfg)
	require.NoError(t, err)
	return n
}

// snapshot captures everything a failed call must leave untouched.
type snapshot struct {
	Root    *instance.Instance
	History []message.Message
	Pending []instance.SuspendedCall
}

func snap(m *machine.Machine) snapshot {
	return snapshot{Root: m.Root(), History: m.History(), Pending: m.Pending()}
}

func requireUnchanged(t *testing.T, before snapshot, m *machine.Machine) {
	t.Helper()
	if d := cmp.Diff(before, snap(m)); d != "" {
		t.Fatalf("machine changed (-before +after):\n%s", d)
	}
}

// lastToolResults returns the parts of the last tool message in msgs.
func lastToolResults(msgs []message.Message) []message.Part {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.Tool {
			return msgs[i].Parts
		}
	}
	return nil
}

// texts returns the text of each part.
func texts(parts []message.Part) []string {
	return testkit.Map(parts, func(p message.Part) string { return p.Text })
}

// marshal serializes m, for byte comparisons before and after.
func marshal(t *testing.T, m *machine.Machine) []byte {
	t.Helper()
	data, err := serialize.Marshal(m)
	require.NoError(t, err)
	return data
}
