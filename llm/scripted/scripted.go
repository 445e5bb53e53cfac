// Package scripted is a deterministic llm.Model for tests, examples and the
// offline demo: it plays back replies (text, tool calls, stop reasons,
// per-call latency) in call order, per node, or from a function of the
// request, and records every request it receives. It streams too
// ([Model.Stream]): each reply cut into chunks of a configured size, with
// an optional latency before each chunk ([Config]).
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Call is one tool call of a scripted reply.
type Call struct {
	// ID is the tool-use ID; empty means a generated "toolu_N".
	ID   string
	Name string
	// Input is any JSON-encodable value, or raw JSON.
	Input any
}

// Reply is one scripted model reply.
type Reply struct {
	// Thinking, when set, opens the reply with a thinking block signed
	// Signature.
	Thinking  string
	Signature string
	// Text is the reply's text, if any.
	Text string
	// Calls are the tool calls, in order.
	Calls []Call
	// Stop is the stop reason; empty means ToolUse when there are calls and
	// EndTurn otherwise.
	Stop llm.StopReason
	// Latency delays the reply (honouring context cancellation); a
	// streamed reply, its first chunk.
	Latency time.Duration
	// Err makes the call fail. A streamed reply sends its chunks first
	// (without the end) and then fails with Err, as a provider error
	// mid-stream does.
	Err   error
	Usage llm.Usage
}

// DefaultChunkSize is the [Config.ChunkSize] of a model whose Config sets
// none.
const DefaultChunkSize = 8

// Config says how a [Model] streams.
type Config struct {
	// ChunkSize is how many runes of text, thinking or tool input one
	// chunk carries at most; zero (or less) means [DefaultChunkSize].
	ChunkSize int
	// ChunkLatency delays every chunk of a streamed reply after the first
	// (honouring context cancellation); zero (or less) sends them at once.
	ChunkLatency time.Duration
	// KeepRequests is how many of the latest requests the model keeps for
	// [Model.Requests]: zero keeps them all (a test's default), a negative
	// value none. A long-lived model (a demo, a dev server, a benchmark)
	// sets it so that the transcripts it has seen do not pile up.
	KeepRequests int
}

// Text returns a reply that says s and ends the turn.
func Text(s string) Reply { return Reply{Text: s} }

// Tool returns a reply with one tool call.
func Tool(name string, input any) Reply {
	return Reply{Calls: []Call{{Name: name, Input: input}}}
}

// Tools returns a reply with several tool calls.
func Tools(calls ...Call) Reply { return Reply{Calls: calls} }

// Model plays back a script. It is safe for concurrent use.
type Model struct {
	mu       sync.Mutex
	replies  []Reply
	byNode   map[string][]Reply
	fn       func(*llm.Request) (Reply, error)
	requests []*llm.Request
	calls    int
	ids      int
	cfg      Config
}

// Configure sets how m streams and returns m, for chaining after [New],
// [ByNode] or [Func].
func (m *Model) Configure(cfg Config) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	return m
}

// New returns a model that answers calls in order with replies.
func New(replies ...Reply) *Model { return &Model{replies: replies} }

// ByNode returns a model that answers each node's calls in order from its
// own script, whatever order concurrent leaves call in.
func ByNode(scripts map[string][]Reply) *Model {
	cp := make(map[string][]Reply, len(scripts))
	for k, v := range scripts {
		cp[k] = append([]Reply(nil), v...)
	}
	return &Model{byNode: cp}
}

// Func returns a model that computes each reply from the request.
func Func(fn func(req *llm.Request) (Reply, error)) *Model { return &Model{fn: fn} }

// ProviderName names the provider for telemetry: "scripted" (llm.ProviderNamer).
func (m *Model) ProviderName() string { return "scripted" }

// Generate answers req from the script. Like a provider adapter, it
// refuses a canceled context and a request that fails [llm.CheckRequest]
// (nil, or a transcript with unpaired tool uses) before it records the
// request or takes a reply.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := llm.CheckRequest(req); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	r, err := m.next(req)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, r.Latency); err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return m.response(r)
}

// Stream answers req from the script like Generate, streaming the reply
// (see [llm.Streamer]): its thinking, text and tool inputs cut into
// chunks of at most [Config.ChunkSize] runes, the first after the reply's
// Latency and each next after [Config.ChunkLatency], then the
// [llm.ChunkEnd] with the reply Generate would return. A reply with Err
// streams its chunks and then fails with Err.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if err := m.stream(ctx, req, yield); err != nil {
			yield(llm.Chunk{}, err)
		}
	}
}

// stream yields the chunks of the reply to req and returns the error that
// ends it, if any (nil too when the caller stopped).
func (m *Model) stream(ctx context.Context, req *llm.Request, yield func(llm.Chunk, error) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := llm.CheckRequest(req); err != nil {
		return fmt.Errorf("scripted: %w", err)
	}
	r, err := m.next(req)
	if err != nil {
		return err
	}
	resp, err := m.response(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	cfg := m.cfg
	m.mu.Unlock()
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	delay := r.Latency
	for c := range llm.ResponseChunks(resp, cfg.ChunkSize) {
		if c.Kind == llm.ChunkEnd && r.Err != nil {
			return r.Err
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		delay = cfg.ChunkLatency
		if !yield(c, nil) {
			return nil
		}
	}
	return nil
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func (m *Model) next(req *llm.Request) (Reply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(req)
	switch {
	case m.fn != nil:
		m.mu.Unlock()
		r, err := m.fn(req)
		m.mu.Lock()
		return r, err
	case m.byNode != nil:
		q := m.byNode[req.Node]
		if len(q) == 0 {
			return Reply{}, fmt.Errorf("%w for node %s (call %d)", ErrExhausted, req.Node, m.calls)
		}
		m.byNode[req.Node] = q[1:]
		return q[0], nil
	}
	if len(m.replies) == 0 {
		return Reply{}, fmt.Errorf("%w (call %d)", ErrExhausted, m.calls)
	}
	r := m.replies[0]
	m.replies = m.replies[1:]
	return r, nil
}

// record counts req and keeps it as [Config.KeepRequests] says; m.mu is
// held. A capped history is compacted once it holds twice the cap, so
// that the requests it dropped can be collected.
func (m *Model) record(req *llm.Request) {
	m.calls++
	keep := m.cfg.KeepRequests
	switch {
	case keep < 0:
		return
	case keep > 0 && len(m.requests) >= 2*keep:
		m.requests = append(make([]*llm.Request, 0, 2*keep), m.requests[len(m.requests)-keep+1:]...)
	}
	m.requests = append(m.requests, req)
}

func (m *Model) response(r Reply) (*llm.Response, error) {
	msg := message.Message{Role: message.Assistant}
	n := len(r.Calls)
	if r.Thinking != "" || r.Signature != "" {
		n++
	}
	if r.Text != "" {
		n++
	}
	msg.Parts = make([]message.Part, 0, n)
	if r.Thinking != "" || r.Signature != "" {
		msg.Parts = append(msg.Parts, message.Thinking(r.Thinking, r.Signature))
	}
	if r.Text != "" {
		msg.Parts = append(msg.Parts, message.Text(r.Text))
	}
	for _, c := range r.Calls {
		input, err := encode(c.Input)
		if err != nil {
			return nil, fmt.Errorf("scripted: tool %s input: %w", c.Name, err)
		}
		id := c.ID
		if id == "" {
			m.mu.Lock()
			m.ids++
			id = "toolu_" + strconv.Itoa(m.ids)
			m.mu.Unlock()
		}
		msg.Parts = append(msg.Parts, message.ToolUse(id, c.Name, input))
	}
	stop := r.Stop
	if stop == "" {
		stop = llm.EndTurn
		if len(r.Calls) > 0 {
			stop = llm.ToolUse
		}
	}
	return &llm.Response{Message: msg, StopReason: stop, Usage: r.Usage}, nil
}

func encode(v any) (json.RawMessage, error) {
	switch in := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		return in, nil
	case string:
		if json.Valid([]byte(in)) {
			return json.RawMessage(in), nil
		}
	}
	return json.Marshal(v)
}

// Requests returns the requests received so far, in call order: all of
// them, or the latest [Config.KeepRequests]. They share the caller's
// transcripts: read them, do not modify them.
func (m *Model) Requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.requests
	if keep := m.cfg.KeepRequests; keep > 0 && len(kept) > keep {
		kept = kept[len(kept)-keep:]
	}
	return append([]*llm.Request(nil), kept...)
}

// Calls returns the number of calls received, kept or not.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// Remaining returns how many call-order replies are left.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.replies)
}
