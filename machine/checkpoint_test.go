package machine_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// payments is a tool that records the idempotency key of every execution,
// as a payment API would see them.
type payments struct {
	mu   sync.Mutex
	keys []string
}

func (p *payments) tool() node.Tool[empty] {
	return node.NewTool("pay", "pay once", func(ctx *node.ToolContext[empty], _ empty) (string, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.keys = append(p.keys, ctx.IdempotencyKey())
		return "paid", nil
	})
}

// checkpointCharter is a charter whose model calls pay (tool-use ID u1),
// then says done; calls counts the model calls.
func checkpointCharter(t *testing.T, p *payments, calls *atomic.Int64) *machine.Charter {
	t.Helper()
	script := scripted.New(scripted.Tools(scripted.Call{ID: "u1", Name: "pay"}), scripted.Text("done"))
	var mu sync.Mutex
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) (*llm.Response, error) {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return script.Generate(ctx, req)
	})
	n := mustNode(t, "n", node.Config[empty]{Tools: []node.Tool[empty]{p.tool()}})
	return charter(t, model, n)
}

// In checkpoint mode a round yields the model's reply before any tool
// runs; a machine saved there and restored elsewhere runs the tools from
// the saved reply: no second model call, the same tool-use ID and so the
// same idempotency key.
func TestCheckpointContinuesSavedReply(t *testing.T) {
	for name, codec := range map[string]struct {
		marshal   func(*machine.Machine) ([]byte, error)
		unmarshal func(*machine.Charter, []byte) (*machine.Machine, error)
	}{
		"msgpack": {serialize.Marshal, serialize.Unmarshal},
		"json":    {serialize.MarshalJSON, serialize.UnmarshalJSON},
	} {
		t.Run(name, func(t *testing.T) {
			var p payments
			var calls atomic.Int64
			c := checkpointCharter(t, &p, &calls)
			m := newMachine(t, c, "n")
			m.SetCheckpoints(true)
			var saved []byte
			for s, err := range m.Run(context.Background(), machine.UserText("pay")) {
				require.NoError(t, err)
				require.Equal(t, machine.Replied, s.Reason)
				require.NotNil(t, s.Root.Reply, "the reply is on the tree")
				require.Equal(t, "u1", s.Root.Reply.Message.ToolUses()[0].ID)
				var err2 error
				saved, err2 = codec.marshal(m)
				require.NoError(t, err2)
				break // the process dies here
			}
			require.Empty(t, p.keys, "no tool ran before the save")
			require.EqualValues(t, 1, calls.Load())

			restored, err := codec.unmarshal(c, saved)
			require.NoError(t, err)
			require.NotNil(t, restored.Root().Reply)
			steps := run(t, restored)
			require.Equal(t, []machine.YieldReason{machine.ToolUse, machine.EndTurn}, reasons(steps))
			require.Zero(t, steps[0].Usage, "the Replied step reported the reply's usage")
			require.EqualValues(t, 2, calls.Load(), "one call for the saved reply, one after the tools")
			require.Equal(t, []string{m.Root().ID + "/u1"}, p.keys)
			require.Nil(t, restored.Root().Reply)
			require.Equal(t, "u1", lastToolResults(restored.History())[0].ID)
		})
	}
}

// Checkpoint mode yields a Replied step before every round's tools;
// without it a round is one step, as before.
func TestCheckpointSteps(t *testing.T) {
	for _, on := range []bool{false, true} {
		var p payments
		var calls atomic.Int64
		m := newMachine(t, checkpointCharter(t, &p, &calls), "n")
		m.SetCheckpoints(on)
		steps := run(t, m, machine.UserText("pay"))
		want := []machine.YieldReason{machine.ToolUse, machine.EndTurn}
		if on {
			want = []machine.YieldReason{machine.Replied, machine.ToolUse, machine.Replied, machine.EndTurn}
		}
		require.Equal(t, want, reasons(steps))
		require.EqualValues(t, 2, calls.Load())
		require.Len(t, p.keys, 1)
	}
}

// Resume handlers and commands get stable idempotency keys too: the
// suspension and its stage, and the caller's invocation ID.
func TestIdempotencyKeys(t *testing.T) {
	var keys []string
	ask := node.NewTool("ask", "ask a person", func(ctx *node.ToolContext[empty], _ empty) (string, error) {
		return "", ctx.Suspend("approve?")
	}, node.OnResume(func(ctx *node.ToolContext[empty], _ empty, _ node.Resumed[json.RawMessage]) (string, error) {
		keys = append(keys, ctx.IdempotencyKey())
		return "approved", nil
	}))
	refund := command.New("refund", "refund once", func(ctx *command.Context[empty], _ empty) (string, error) {
		keys = append(keys, ctx.IdempotencyKey())
		return "refunded", nil
	})
	n := mustNode(t, "n", node.Config[empty]{Tools: []node.Tool[empty]{ask}, Commands: []command.Command[empty]{refund}})
	m := newMachine(t, charter(t, scripted.New(scripted.Tools(scripted.Call{ID: "u1", Name: "ask"}), scripted.Text("ok")), n), "n")
	steps := run(t, m, machine.UserText("go"))
	id := steps[len(steps)-1].Suspensions[0].SuspendID
	run(t, m, machine.ResumeInput{SuspendID: id, Payload: "yes"})
	run(t, m, command.Invocation{Name: "refund", Input: empty{}, ID: "req-7"}, command.Invoke("refund", empty{}))
	root := m.Root().ID
	require.Equal(t, []string{root + "/resume/" + id + "/0", root + "/command/req-7", ""}, keys)
}
