package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/adapter"
)

var _ llm.Streamer = (*Model)(nil)

// Stream sends req as a streamed chat completion, with usage asked for
// through stream_options.include_usage, and yields the reply as it arrives
// (see [llm.Streamer]): text and refusal deltas as text chunks, a chunk for
// the start of each function tool call and one per arguments delta, and
// after the stream's [DONE] the [llm.ChunkEnd] with the reply Generate
// would return for the same completion (the SDK's ChatCompletionAccumulator
// assembles it; usage is the final usage chunk's).
//
// An error chunk in the stream is yielded as an error; a stream that ends
// without [DONE] yields an error wrapping [llm.ErrIncompleteStream]. Errors
// are prefixed "openai: ". The request is checked first, as by Generate.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return adapter.Stream(ctx, "openai", req, m.params, m.stream)
}

// stream yields the chunks of the completion params and returns the error
// that ends it, if any (nil too when the caller stopped); structured says
// whether the request asked for structured output.
func (m *Model) stream(ctx context.Context, params openai.ChatCompletionNewParams, structured bool, yield func(llm.Chunk, error) bool) error {
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	// The SDK's NewStreaming, with the decoder watched for [DONE]: its
	// stream ends the same way without it.
	var raw *http.Response
	if _, err := m.completions.New(ctx, params, option.WithJSONSet("stream", true), option.WithResponseBodyInto(&raw)); err != nil {
		return err
	}
	decoder := &doneDecoder{Decoder: ssestream.NewDecoder(raw)}
	s := streamState{text: -1, refusal: -1, tools: make(map[int64]int)}
	return adapter.Drain(ssestream.NewStream[openai.ChatCompletionChunk](decoder, nil), s.add, func() (*llm.Response, error) {
		if !decoder.done {
			return nil, fmt.Errorf("%w: no [DONE]", llm.ErrIncompleteStream)
		}
		s.acc.Usage = s.usage
		return toResponse(&s.acc.ChatCompletion, structured)
	}, yield)
}

// doneDecoder is an SSE decoder that notes the [DONE] event ending a
// stream.
type doneDecoder struct {
	ssestream.Decoder
	done bool
}

// Next decodes the next event.
func (d *doneDecoder) Next() bool {
	if d.Decoder == nil || !d.Decoder.Next() {
		return false
	}
	if bytes.HasPrefix(d.Event().Data, []byte("[DONE]")) {
		d.done = true
	}
	return true
}

// Close closes the stream, if there is one.
func (d *doneDecoder) Close() error {
	if d.Decoder == nil {
		return nil
	}
	return d.Decoder.Close()
}

// Err returns the decoder's error; a missing body is one.
func (d *doneDecoder) Err() error {
	if d.Decoder == nil {
		return errors.New("response has no body")
	}
	return d.Decoder.Err()
}

// streamState follows one streamed completion.
type streamState struct {
	acc   openai.ChatCompletionAccumulator
	usage openai.CompletionUsage
	// parts counts the parts started; text and refusal are the indexes of
	// the content and refusal parts, and tools those of the tool calls by
	// their index in the stream (-1: not started).
	parts         int
	text, refusal int
	tools         map[int64]int
	out           []llm.Chunk
}

// add accumulates the chunk c of the completion and returns the chunks of
// its first choice's delta. The slice is reused by the next call.
func (s *streamState) add(c openai.ChatCompletionChunk) ([]llm.Chunk, error) {
	if !s.acc.AddChunk(c) {
		return nil, fmt.Errorf("chunk %q does not continue completion %q", c.ID, s.acc.ID)
	}
	if c.JSON.Usage.Valid() {
		s.usage = c.Usage
	}
	s.out = s.out[:0]
	for _, choice := range c.Choices {
		if choice.Index != 0 {
			continue
		}
		d := choice.Delta
		if d.Content != "" {
			s.out = append(s.out, llm.Chunk{Kind: llm.ChunkText, Index: s.part(&s.text), Text: d.Content})
		}
		if d.Refusal != "" {
			s.out = append(s.out, llm.Chunk{Kind: llm.ChunkText, Index: s.part(&s.refusal), Text: d.Refusal})
		}
		for _, tc := range d.ToolCalls {
			index, ok := s.tools[tc.Index]
			if !ok {
				index = s.parts
				s.parts++
				s.tools[tc.Index] = index
				s.out = append(s.out, llm.Chunk{Kind: llm.ChunkToolUse, Index: index, ID: tc.ID, Name: tc.Function.Name})
			}
			if tc.Function.Arguments != "" {
				s.out = append(s.out, llm.Chunk{Kind: llm.ChunkToolInput, Index: index, Text: tc.Function.Arguments})
			}
		}
	}
	return s.out, nil
}

// part returns *index, starting a part there first if it is -1.
func (s *streamState) part(index *int) int {
	if *index < 0 {
		*index = s.parts
		s.parts++
	}
	return *index
}
