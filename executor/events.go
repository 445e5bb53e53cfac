package executor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Sink receives the events of a step as they happen. The executor may call
// it from several goroutines at once (the tools of a reply that run in
// parallel); it must return quickly and must not retain the event's
// slices beyond the call unless it copies them.
type Sink func(Event)

// EventKind names the kind of a step [Event]: a stable string, fit for a
// log.
type EventKind string

// The kinds of step event.
const (
	// EventTextDelta: Text is the next piece of the reply's text block at
	// Block.
	EventTextDelta EventKind = "text_delta"
	// EventThinkingDelta: Text is the next piece of the reply's thinking
	// block at Block.
	EventThinkingDelta EventKind = "thinking_delta"
	// EventToolStarted: the tool call Tool starts (name, tool-use ID,
	// input).
	EventToolStarted EventKind = "tool_started"
	// EventToolFinished: the tool call Tool returned (result, error flag,
	// suspension, duration).
	EventToolFinished EventKind = "tool_finished"
)

// Event is something that happened during one leaf's step, reported as it
// happens to [StepRequest.Events]. It is plain data.
type Event struct {
	Kind EventKind `json:"kind"`
	// InstanceID and Node name the leaf.
	InstanceID string `json:"instance_id"`
	Node       string `json:"node"`
	// Block is the index of the content block a delta belongs to: the
	// index of its part in the reply's message as the model sent it.
	Block int `json:"block,omitempty"`
	// Text is a delta's text.
	Text string `json:"text,omitempty"`
	// Tool is the call of a tool event.
	Tool *ToolCall `json:"tool,omitempty"`
}

// ToolCall describes one tool call of a tool event. The fields after
// Input are set when it finished.
type ToolCall struct {
	ToolUseID string          `json:"tool_use_id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Result is the text of the tool result; IsError marks a failure (a
	// tool error, timeout, panic, unknown tool).
	Result  string `json:"result,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// SuspendID is set when the call suspended: it has no result yet.
	SuspendID string `json:"suspend_id,omitempty"`
	// Duration is how long the handler ran.
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// toolStarted reports the start of tool use u, when anyone listens, and
// returns the time it started.
func (lf *leaf) toolStarted(u message.Part) time.Time {
	if lf.events == nil {
		return time.Time{}
	}
	lf.events(Event{Kind: EventToolStarted, InstanceID: lf.in.ID, Node: lf.in.Node,
		Tool: &ToolCall{ToolUseID: u.ID, Name: u.Name, Input: u.Data}})
	return time.Now()
}

// toolFinished reports the end of tool use u, started at start, with its
// result res or suspended call c.
func (lf *leaf) toolFinished(u message.Part, start time.Time, res message.Part, c *instance.SuspendedCall) {
	if lf.events == nil {
		return
	}
	tc := &ToolCall{ToolUseID: u.ID, Name: u.Name, Input: u.Data, Result: res.Text, IsError: res.IsError}
	if !start.IsZero() {
		tc.Duration = time.Since(start)
	}
	if c != nil {
		tc.SuspendID = c.SuspendID
	}
	lf.events(Event{Kind: EventToolFinished, InstanceID: lf.in.ID, Node: lf.in.Node, Tool: tc})
}

// stream streams model's reply to req (llm.Stream: one chunk per block
// from a model that does not stream), reporting its text and thinking
// deltas. A stream that fails or ends without its end is an error, never
// a reply.
func (lf *leaf) stream(ctx context.Context, model llm.Model, req *llm.Request) (*llm.Response, error) {
	var acc llm.Accumulator
	for c, err := range llm.Stream(ctx, model, req) {
		if err != nil {
			return nil, err
		}
		if err := acc.Add(c); err != nil {
			return nil, err
		}
		var kind EventKind
		switch c.Kind {
		case llm.ChunkText:
			kind = EventTextDelta
		case llm.ChunkThinking:
			kind = EventThinkingDelta
		}
		if kind != "" && c.Text != "" {
			lf.events(Event{Kind: kind, InstanceID: lf.in.ID, Node: lf.in.Node, Block: c.Index, Text: c.Text})
		}
	}
	return acc.Response()
}
