package peers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// einoModel is the zero-latency model, as markovModel: it calls
// lookup_order, or, when answer is set and the last message is the
// tool's result, gives the final answer.
type einoModel struct {
	answer bool
	calls  []schema.ToolCall
}

// newEinoModel returns a model whose tool-calling reply holds one
// lookup_order call, or calls of them.
func newEinoModel(answer bool, calls ...int) *einoModel {
	n := 1
	if len(calls) > 0 {
		n = calls[0]
	}
	m := &einoModel{answer: answer}
	for i := range n {
		m.calls = append(m.calls, schema.ToolCall{
			ID: "call_" + strconv.Itoa(i+1), Type: "function", Function: schema.FunctionCall{Name: toolName, Arguments: orderInput},
		})
	}
	return m
}

func (m *einoModel) reply(in []*schema.Message) *schema.Message {
	if m.answer && in[len(in)-1].Role == schema.Tool {
		return schema.AssistantMessage(finalAnswer, nil)
	}
	return schema.AssistantMessage("", m.calls)
}

func (m *einoModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	return m.reply(in), nil
}

func (m *einoModel) Stream(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return schema.StreamReaderFromArray([]*schema.Message{m.reply(in)}), nil
}

func (m *einoModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

// einoHistory returns n messages of blocks.
func einoHistory(n int) []*schema.Message {
	h := make([]*schema.Message, 0, n)
	for _, b := range blocks(n) {
		h = append(h,
			schema.UserMessage(b.question),
			schema.AssistantMessage("", []schema.ToolCall{{ID: b.callID, Type: "function", Function: schema.FunctionCall{Name: toolName, Arguments: b.input}}}),
			schema.ToolMessage(b.result, b.callID),
			schema.AssistantMessage(b.answer, nil),
		)
	}
	return h
}

// einoLookup is lookup_order: utils.InferTool infers the schema from
// lookupIn and decodes the arguments into it with sonic.
func einoLookup(tb testing.TB, calls *atomic.Int64) tool.BaseTool {
	return ok(utils.InferTool(toolName, toolDesc, func(_ context.Context, in lookupIn) (string, error) {
		return lookup(calls, in), nil
	}))(tb)
}

// einoAgent returns a ReAct agent with lookup; with direct, the agent
// returns the tool's result instead of calling the model again, so a run
// is one round: one model call, one tool call.
func einoAgent(tb testing.TB, model *einoModel, lookup tool.BaseTool, direct bool) *react.Agent {
	cfg := &react.AgentConfig{
		ToolCallingModel: model,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []tool.BaseTool{lookup}},
	}
	if direct {
		cfg.ToolReturnDirectly = map[string]struct{}{toolName: {}}
	}
	return ok(react.NewAgent(context.Background(), cfg))(tb)
}

// checkpointed compiles agent's ReAct graph again, with store as its
// CheckPointStore and opts: react.NewAgent compiles it without one.
func checkpointed(tb testing.TB, agent *react.Agent, store compose.CheckPointStore, opts ...compose.GraphCompileOption) compose.Runnable[[]*schema.Message, *schema.Message] {
	g, _ := agent.ExportGraph()
	graph, isGraph := g.(*compose.Graph[[]*schema.Message, *schema.Message])
	if !isGraph {
		tb.Fatalf("the ReAct graph is a %T", g)
	}
	opts = append([]compose.GraphCompileOption{
		compose.WithNodeTriggerMode(compose.AnyPredecessor), // as react.NewAgent compiles it
		compose.WithGraphName(react.GraphName),
		compose.WithCheckPointStore(store),
	}, opts...)
	return ok(graph.Compile(context.Background(), opts...))(tb)
}

// memStore is an in-memory CheckPointStore.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, found := s.m[id]
	return data, found, nil
}

func (s *memStore) Set(_ context.Context, id string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[id] = data
	return nil
}

// withQuestion returns n messages of history and the question.
func withQuestion(n int) []*schema.Message {
	return append(einoHistory(n), schema.UserMessage(question))
}

// einoRound is markovRound: the agent takes the history, as every call
// of a ReAct agent does, and runs one round.
func einoRound(tb testing.TB, n int) run {
	calls := new(atomic.Int64)
	agent := einoAgent(tb, newEinoModel(false), einoLookup(tb, calls), true)
	h := einoHistory(n)
	ctx := context.Background()
	return run{do: func() (string, error) {
		return content(agent.Generate(ctx, h))
	}, calls: calls}
}

// einoInputRound is markovRestoreRound: the same as einoRound, since a
// ReAct agent takes in the whole decoded history on every call.
func einoInputRound(tb testing.TB, n int) run { return einoRound(tb, n) }

// einoCheckpointRound is markovUnmarshalRound: the checkpoint holds the
// history as the input of the model node (the graph was interrupted
// before it); each run loads it from the store, decodes it and runs one
// round. A run that ends does not write a checkpoint, so the stored one
// serves every run.
func einoCheckpointRound(tb testing.TB, n int) run {
	calls := new(atomic.Int64)
	store := &memStore{}
	r := checkpointed(tb, einoAgent(tb, newEinoModel(false), einoLookup(tb, calls), true), store, compose.WithInterruptBeforeNodes([]string{"chat"}))
	ctx := context.Background()
	const id = "history"
	if _, err := r.Invoke(ctx, einoHistory(n), compose.WithCheckPointID(id)); !isInterrupt(err) {
		tb.Fatalf("the first run did not stop before the model: %v", err)
	}
	return run{do: func() (string, error) {
		return content(r.Invoke(ctx, nil, compose.WithCheckPointID(id)))
	}, calls: calls}
}

// content is the text of an agent's answer msg, or err.
func content(msg *schema.Message, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return msg.Content, nil
}

func isInterrupt(err error) bool {
	_, found := compose.ExtractInterruptInfo(err)
	return found
}

// einoCycle is markovCycle: lookup_order interrupts; the graph's
// checkpoint (its state, the history included) goes through eino's
// serializer into the store; the resume loads it and passes the tool's
// result to the interrupted call, and the model answers.
func einoCycle(tb testing.TB, n int) run {
	calls := new(atomic.Int64)
	ask := ok(utils.InferTool(toolName, toolDesc, func(ctx context.Context, in lookupIn) (string, error) {
		if resumed, hasData, payload := compose.GetResumeContext[string](ctx); resumed && hasData {
			return payload, nil
		}
		calls.Add(1)
		return "", compose.Interrupt(ctx, "waiting for the warehouse")
	}))(tb)
	store := &memStore{}
	r := checkpointed(tb, einoAgent(tb, newEinoModel(true), ask, false), store)
	in := withQuestion(n)
	ctx := context.Background()
	var runs int
	return run{do: func() (string, error) {
		runs++
		id := strconv.Itoa(runs)
		_, err := r.Invoke(ctx, in, compose.WithCheckPointID(id))
		info, found := compose.ExtractInterruptInfo(err)
		if !found {
			return "", fmt.Errorf("peers: the tool did not interrupt: %w", err)
		}
		if len(info.InterruptContexts) != 1 {
			return "", fmt.Errorf("peers: %d interrupts, want 1", len(info.InterruptContexts))
		}
		resume := compose.ResumeWithData(ctx, info.InterruptContexts[0].ID, toolResult)
		return content(r.Invoke(resume, nil, compose.WithCheckPointID(id)))
	}, calls: calls}
}

// einoWorkers is markovWorkers: 101 ReAct agents (the exported graph of
// each, returning the tool's result directly) as the branches of one
// compose.Parallel, all given the same history.
func einoWorkers(tb testing.TB, workers, n int) run {
	calls := new(atomic.Int64)
	p := compose.NewParallel()
	keys := []string{"desk"}
	for i := range workers {
		keys = append(keys, "w"+strconv.Itoa(i))
	}
	for _, k := range keys {
		g, opts := einoAgent(tb, newEinoModel(false), einoLookup(tb, calls), true).ExportGraph()
		p.AddGraph(k, g, opts...)
	}
	chain := compose.NewChain[[]*schema.Message, map[string]any]().AppendParallel(p)
	r := ok(chain.Compile(context.Background()))(tb)
	h := einoHistory(n)
	ctx := context.Background()
	return run{do: func() (string, error) {
		out, err := r.Invoke(ctx, h)
		if err != nil {
			return "", err
		}
		if len(out) != len(keys) {
			return "", fmt.Errorf("peers: %d branches answered, want %d", len(out), len(keys))
		}
		msg, isMsg := out["desk"].(*schema.Message)
		if !isMsg {
			return "", errors.New("peers: the primary branch gave no message")
		}
		return msg.Content, nil
	}, calls: calls}
}

// einoToolCalls is the cheaper reading of the workers workload: one ReAct
// agent whose model reply holds 101 lookup_order calls, which its tools
// node runs concurrently (one model call, 101 tool calls).
func einoToolCalls(tb testing.TB, calls, n int) run {
	counter := new(atomic.Int64)
	agent := einoAgent(tb, newEinoModel(false, calls), einoLookup(tb, counter), true)
	h := einoHistory(n)
	ctx := context.Background()
	return run{do: func() (string, error) {
		return content(agent.Generate(ctx, h))
	}, calls: counter}
}
