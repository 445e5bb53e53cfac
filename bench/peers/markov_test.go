package peers

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// deskState is the state of every markov node here.
type deskState struct {
	Topic string `json:"topic"`
}

// markovModel is the zero-latency model: it calls lookup_order, or, when
// answer is set and the last message is the tool's result, gives the
// final answer.
type markovModel struct {
	answer      bool
	call, final llm.Response
}

// newMarkovModel returns the model; its call asks for lookup_order once,
// or calls[0] times in one reply.
func newMarkovModel(answer bool, calls ...int) *markovModel {
	n := 1
	if len(calls) > 0 {
		n = calls[0]
	}
	uses := make([]message.Part, n)
	for i := range uses {
		uses[i] = message.ToolUse("call_"+strconv.Itoa(i+1), toolName, []byte(orderInput))
	}
	return &markovModel{
		answer: answer,
		call: llm.Response{
			Message:    message.Message{Role: message.Assistant, Parts: uses},
			StopReason: llm.ToolUse,
		},
		final: llm.Response{
			Message:    message.Message{Role: message.Assistant, Parts: []message.Part{message.Text(finalAnswer)}},
			StopReason: llm.EndTurn,
		},
	}
}

func (m *markovModel) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	r := m.call
	if m.answer && req.Messages[len(req.Messages)-1].Role == message.Tool {
		r = m.final
	}
	return &r, nil
}

// markovHistory returns n messages of blocks.
func markovHistory(n int) []message.Message {
	h := make([]message.Message, 0, n)
	// A machine scopes an agent's tool exchanges to it (deskTree's ID).
	own := message.Source{InstanceID: "desk", Node: "desk", To: "desk"}
	for _, b := range blocks(n) {
		h = append(h,
			message.UserText(b.question),
			message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse(b.callID, toolName, []byte(b.input))}, Source: own},
			message.Message{Role: message.Tool, Parts: []message.Part{message.ToolResult(b.callID, b.result, false)}, Source: own},
			message.Message{Role: message.Assistant, Parts: []message.Part{message.Text(b.answer)}},
		)
	}
	return h
}

// markovLookup is lookup_order; node.NewTool validates its input against
// the schema inferred from lookupIn before the handler runs.
func markovLookup(calls *atomic.Int64) node.Tool[deskState] {
	return node.NewTool(toolName, toolDesc, func(ctx *node.ToolContext[deskState], in lookupIn) (string, error) {
		return lookup(calls, in), nil
	})
}

// markovCharter returns a charter with the node "desk" (lookup_order)
// and, with workers, the nodes "worker" (lookup_order, Worker) and "root"
// (no tools); and the tool's call counter.
func markovCharter(tb testing.TB, model llm.Model, workers bool) (*machine.Charter, *atomic.Int64) {
	calls := new(atomic.Int64)
	desk := ok(node.New("desk", node.Config[deskState]{Instructions: "Answer questions about orders.", Tools: []node.Tool[deskState]{markovLookup(calls)}}))(tb)
	nodes := []*node.Node{desk}
	if workers {
		worker := ok(node.New("worker", node.Config[deskState]{Worker: true, Tools: []node.Tool[deskState]{markovLookup(calls)}}))(tb)
		root := ok(node.New("root", node.Config[deskState]{}))(tb)
		nodes = append(nodes, worker, root)
	}
	c := ok(machine.NewCharter(machine.CharterConfig{Model: model, Nodes: nodes, MaxSteps: 1 << 30}))(tb)
	return c, calls
}

// ok returns a function that returns v, or fails tb with err.
func ok[T any](v T, err error) func(tb testing.TB) T {
	return func(tb testing.TB) T {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
}

// capped returns the history of h with no spare capacity: a machine
// restored from it appends into a new array and leaves h as it was, so
// one decoded history serves every iteration without a copy.
func capped(h []message.Message) message.History { return message.NewHistory(h).Clip() }

// roomy returns a copy of h with room to grow, as a history decoded by
// serialize has: a machine restored from it appends its rounds' messages
// in place. Every iteration restores from the same messages (what one
// appended beyond them, the next overwrites).
func roomy(h []message.Message) []message.Message {
	return append(make([]message.Message, 0, len(h)+len(h)/4+16), h...)
}

func deskTree(idle bool) *instance.Instance {
	return &instance.Instance{ID: "desk", Node: "desk", State: deskState{}, Idle: idle}
}

// markovRoundOf runs one round of m (the model's call and the tool's) and
// returns the tool's result.
func markovRoundOf(m *machine.Machine) (string, error) {
	for s, err := range m.Run(context.Background()) {
		if err != nil {
			return "", err
		}
		return toolResultPart(s.Messages).Text, nil
	}
	return "", errors.New("peers: the round yielded no step")
}

// toolResultPart returns the first tool result part in msgs.
func toolResultPart(msgs []message.Message) message.Part {
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Kind == message.KindToolResult {
				return p
			}
		}
	}
	return message.Part{}
}

func markovRound(tb testing.TB, n int) run {
	c, calls := markovCharter(tb, newMarkovModel(false), false)
	h := markovHistory(n)
	var m *machine.Machine
	reset := func() {
		m = ok(machine.Restore(c, deskTree(false), capped(h)))(tb)
		ok(markovRoundOf(m))(tb) // the leaf's transcript is built
	}
	reset()
	return run{do: func() (string, error) { return markovRoundOf(m) }, calls: calls, reset: reset, every: 1000}
}

// markovRestoreRound is Restore from a decoded history of n messages and
// one round of a leaf whose model reply asks for calls lookup_order calls
// (einoToolCalls with more than one: eino's agent is given the history on
// every call).
func markovRestoreRound(tb testing.TB, calls, n int) run {
	c, counter := markovCharter(tb, newMarkovModel(false, calls), false)
	h := message.NewHistory(roomy(markovHistory(n)))
	return restoreRun(c, counter, func() message.History { return h })
}

// markovPlainRound is markovRestoreRound from a plain slice of n
// messages, as an application that keeps its conversations in its own
// tables hands one over: each run wraps it with message.NewHistory
// (which reads every message once) and restores a machine from it. The
// slice has no room past its end: the round's messages go past it, and
// it is left as it was for the next run.
func markovPlainRound(tb testing.TB, n int) run {
	c, counter := markovCharter(tb, newMarkovModel(false), false)
	h := markovHistory(n)
	return restoreRun(c, counter, func() message.History { return message.NewHistory(h) })
}

// restoreRun restores a machine of c from history() and runs one round.
func restoreRun(c *machine.Charter, calls *atomic.Int64, history func() message.History) run {
	return run{do: func() (string, error) {
		m, err := machine.Restore(c, deskTree(false), history())
		if err != nil {
			return "", err
		}
		return markovRoundOf(m)
	}, calls: calls}
}

func markovUnmarshalRound(tb testing.TB, n int) run {
	c, calls := markovCharter(tb, newMarkovModel(false), false)
	data := ok(serialize.Marshal(ok(machine.Restore(c, deskTree(false), message.NewHistory(markovHistory(n))))(tb)))(tb)
	return run{do: func() (string, error) {
		m, err := serialize.Unmarshal(c, data)
		if err != nil {
			return "", err
		}
		return markovRoundOf(m)
	}, calls: calls}
}

func markovCycle(tb testing.TB, n int) run {
	calls := new(atomic.Int64)
	ask := node.NewTool(toolName, toolDesc, func(ctx *node.ToolContext[deskState], in lookupIn) (string, error) {
		calls.Add(1)
		return "", ctx.Suspend("waiting for the warehouse")
	})
	desk := ok(node.New("desk", node.Config[deskState]{Instructions: "Answer questions about orders.", Tools: []node.Tool[deskState]{ask}}))(tb)
	c := ok(machine.NewCharter(machine.CharterConfig{Model: newMarkovModel(true), Nodes: []*node.Node{desk}}))(tb)
	h := message.NewHistory(roomy(markovHistory(n)))
	ctx := context.Background()
	return run{do: func() (string, error) {
		m, err := machine.Restore(c, deskTree(true), h)
		if err != nil {
			return "", err
		}
		var id string
		for s, err := range m.Run(ctx, machine.UserText(question)) {
			if err != nil {
				return "", err
			}
			if len(s.Suspensions) > 0 {
				id = s.Suspensions[0].SuspendID
			}
		}
		data, err := serialize.Marshal(m)
		if err != nil {
			return "", err
		}
		if m, err = serialize.Unmarshal(c, data); err != nil {
			return "", err
		}
		var answer string
		for s, err := range m.Run(ctx, machine.ResumeInput{SuspendID: id, Payload: toolResult}) {
			if err != nil {
				return "", err
			}
			if len(s.Messages) > 0 {
				answer = s.Messages[len(s.Messages)-1].Text()
			}
		}
		return answer, nil
	}, calls: calls}
}

func markovWorkers(tb testing.TB, workers, n int) run {
	c, calls := markovCharter(tb, newMarkovModel(false), true)
	h := markovHistory(n)
	var m *machine.Machine
	reset := func() {
		tree := &instance.Instance{ID: "root", Node: "root", State: deskState{}}
		tree.Children = append(tree.Children, deskTree(false))
		for i := range workers {
			tree.Children = append(tree.Children, &instance.Instance{ID: "w" + strconv.Itoa(i), Node: "worker", State: deskState{}})
		}
		m = ok(machine.Restore(c, tree, capped(h)))(tb)
		ok(markovRoundOf(m))(tb) // the leaves' transcripts are built
	}
	reset()
	return run{do: func() (string, error) { return markovRoundOf(m) }, calls: calls, reset: reset, every: 20}
}
