package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/adapter"
)

var _ llm.Streamer = (*Model)(nil)

// Stream sends req to the Messages API with streaming and yields the reply
// as it arrives (see [llm.Streamer]): a chunk for the start of every text,
// thinking, redacted thinking and tool_use block (block types markov does
// not model are skipped and not counted in Index), one per text, thinking,
// signature and input JSON delta, and at message_stop the [llm.ChunkEnd]
// with the reply Generate would return. The SDK decodes the events and
// accumulates the reply (anthropic.Message.Accumulate).
//
// An error event in the stream (overloaded_error, say) is yielded as an
// error holding *anthropic.Error; a stream that ends without message_stop
// yields an error wrapping [llm.ErrIncompleteStream]. Errors are prefixed
// "anthropic: ". The request is checked first, as by Generate.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return adapter.Stream(ctx, "anthropic", req, m.params, m.streamCall)
}

// streamCall streams the call params, yielding its chunks, and returns the
// error that ends it, if any (nil too when the caller stopped); structured
// says whether the request asked for structured output.
func (m *Model) streamCall(ctx context.Context, params anthropic.MessageNewParams, structured bool, yield func(llm.Chunk, error) bool) error {
	var s streamState
	return adapter.Drain(m.client.Messages.NewStreaming(ctx, params), s.add, func() (*llm.Response, error) {
		if !s.stopped {
			return nil, fmt.Errorf("%w: no message_stop event", llm.ErrIncompleteStream)
		}
		return toResponse(&s.reply, structured), nil
	}, yield)
}

// streamState follows one streamed reply.
type streamState struct {
	// reply is the reply accumulated by the SDK.
	reply anthropic.Message
	// parts maps a content block's index to its part's, -1 for a block
	// that is not a part.
	parts []int
	// n counts the parts so far.
	n int
	// started: message_start has come; stopped: message_stop has.
	started, stopped bool
	// out holds the chunk add returns.
	out []llm.Chunk
}

// add accumulates event and returns the chunk it carries, if any. The
// slice is reused by the next call.
func (s *streamState) add(event anthropic.MessageStreamEventUnion) ([]llm.Chunk, error) {
	// Accumulate takes any order; a reply is numbered from its start.
	switch {
	case s.stopped:
		return nil, fmt.Errorf("%s event after message_stop", event.Type)
	case event.Type == "message_start" && (s.started || len(event.Message.Content) > 0):
		return nil, errors.New("message_start after the start, or with content")
	case event.Type != "message_start" && !s.started:
		return nil, fmt.Errorf("%s event before message_start", event.Type)
	}
	s.started = true
	if err := s.reply.Accumulate(event); err != nil {
		return nil, err
	}
	s.out = s.out[:0]
	switch event.Type {
	case "content_block_start":
		if c, ok := s.start(event.ContentBlock); ok {
			s.out = append(s.out, c)
		}
	case "content_block_delta":
		// Accumulate checked the index.
		if index := s.parts[event.Index]; index >= 0 {
			if c, ok := delta(index, event.Delta); ok {
				s.out = append(s.out, c)
			}
		}
	case "message_stop":
		s.stopped = true
	}
	return s.out, nil
}

// start numbers the block b and returns the chunk starting it, if it is a
// part.
func (s *streamState) start(b anthropic.ContentBlockStartEventContentBlockUnion) (llm.Chunk, bool) {
	c := llm.Chunk{Index: s.n}
	switch b.Type {
	case "text":
		c.Kind, c.Text = llm.ChunkText, b.Text
	case "thinking":
		c.Kind, c.Text, c.Signature = llm.ChunkThinking, b.Thinking, b.Signature
	case "redacted_thinking":
		c.Kind, c.Signature = llm.ChunkThinking, b.Data
	case "tool_use":
		c.Kind, c.ID, c.Name = llm.ChunkToolUse, b.ID, b.Name
	default:
		s.parts = append(s.parts, -1)
		return llm.Chunk{}, false
	}
	s.parts = append(s.parts, s.n)
	s.n++
	return c, true
}

// delta returns the chunk of a content block delta to part index.
func delta(index int, d anthropic.MessageStreamEventUnionDelta) (llm.Chunk, bool) {
	c := llm.Chunk{Index: index}
	switch d.Type {
	case "text_delta":
		c.Kind, c.Text = llm.ChunkText, d.Text
	case "thinking_delta":
		c.Kind, c.Text = llm.ChunkThinking, d.Thinking
	case "signature_delta":
		c.Kind, c.Signature = llm.ChunkThinking, d.Signature
	case "input_json_delta":
		if d.PartialJSON == "" {
			return llm.Chunk{}, false
		}
		c.Kind, c.Text = llm.ChunkToolInput, d.PartialJSON
	default:
		return llm.Chunk{}, false // citations
	}
	return c, true
}
