package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// reply is a reply with a block of every kind.
var reply = &llm.Response{
	Message: message.Message{Role: message.Assistant, Parts: []message.Part{
		message.Thinking("Weather: ask the tool.", "sig-1"),
		message.Text("Let me check."),
		message.ToolUse("toolu_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
		message.ToolUse("toolu_2", "get_time", json.RawMessage(`{}`)),
	}},
	StopReason: llm.ToolUse,
	Usage:      llm.Usage{InputTokens: 10, OutputTokens: 20},
}

// streamer is a model that streams chunks it was given.
type streamer struct {
	llm.ModelFunc
	chunks []llm.Chunk
}

func (s streamer) Stream(context.Context, *llm.Request) iter.Seq2[llm.Chunk, error] {
	return chunkSeq(s.chunks)
}

func TestStreamFallsBackToGenerate(t *testing.T) {
	model := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) { return reply, nil })
	got := collect(t, llm.Stream(context.Background(), model, &llm.Request{}))
	want := []llm.Chunk{
		{Kind: llm.ChunkThinking, Index: 0, Text: "Weather: ask the tool.", Signature: "sig-1"},
		{Kind: llm.ChunkText, Index: 1, Text: "Let me check."},
		{Kind: llm.ChunkToolUse, Index: 2, ID: "toolu_1", Name: "get_weather"},
		{Kind: llm.ChunkToolInput, Index: 2, Text: `{"city":"Paris"}`},
		{Kind: llm.ChunkToolUse, Index: 3, ID: "toolu_2", Name: "get_time"},
		{Kind: llm.ChunkToolInput, Index: 3, Text: `{}`},
		{Kind: llm.ChunkEnd, Response: reply},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("chunks (-want +got):\n%s", d)
	}
	resp, err := llm.Collect(llm.AsStreamer(model).Stream(context.Background(), &llm.Request{}))
	require.NoError(t, err)
	require.Same(t, reply, resp)
}

func TestStreamFallbackError(t *testing.T) {
	boom := errors.New("boom")
	for name, model := range map[string]llm.ModelFunc{
		"error":                   func(context.Context, *llm.Request) (*llm.Response, error) { return nil, boom },
		"neither reply nor error": func(context.Context, *llm.Request) (*llm.Response, error) { return nil, nil },
	} {
		t.Run(name, func(t *testing.T) {
			var chunks int
			var errs []error
			for c, err := range llm.Stream(context.Background(), model, &llm.Request{}) {
				if err != nil {
					errs = append(errs, err)
					continue
				}
				chunks++
				_ = c
			}
			require.Zero(t, chunks)
			require.Len(t, errs, 1)
			_, err := llm.Collect(llm.Stream(context.Background(), model, &llm.Request{}))
			require.Error(t, err)
		})
	}
}

func TestStreamUsesStreamer(t *testing.T) {
	s := streamer{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: "hi"}, {Kind: llm.ChunkEnd, Response: reply}}}
	require.Equal(t, llm.Streamer(s), llm.AsStreamer(s))
	got := collect(t, llm.Stream(context.Background(), s, &llm.Request{}))
	require.Equal(t, s.chunks, got)
}

func TestResponseChunksInPieces(t *testing.T) {
	resp := &llm.Response{Message: message.Message{Role: message.Assistant, Parts: []message.Part{
		message.Thinking("héllo wörld", "sig"),
		message.Text("Grüße, 世界!"),
		message.Text(""),
		message.Structured(json.RawMessage(`{"a":1}`), ""),
		message.ToolUse("t1", "f", json.RawMessage(`{"q":"ünï"}`)),
		message.ToolUse("t2", "g", nil),
		message.ToolResult("t1", "not a reply part", false),
	}}}
	got := slices.Collect(llm.ResponseChunks(resp, 4))
	want := []llm.Chunk{
		{Kind: llm.ChunkThinking, Index: 0, Text: "héll"},
		{Kind: llm.ChunkThinking, Index: 0, Text: "o wö"},
		{Kind: llm.ChunkThinking, Index: 0, Text: "rld", Signature: "sig"},
		{Kind: llm.ChunkText, Index: 1, Text: "Grüß"},
		{Kind: llm.ChunkText, Index: 1, Text: "e, 世"},
		{Kind: llm.ChunkText, Index: 1, Text: "界!"},
		{Kind: llm.ChunkText, Index: 2, Text: ""},
		{Kind: llm.ChunkText, Index: 3, Text: `{"a"`},
		{Kind: llm.ChunkText, Index: 3, Text: `:1}`},
		{Kind: llm.ChunkToolUse, Index: 4, ID: "t1", Name: "f"},
		{Kind: llm.ChunkToolInput, Index: 4, Text: `{"q"`},
		{Kind: llm.ChunkToolInput, Index: 4, Text: `:"ün`},
		{Kind: llm.ChunkToolInput, Index: 4, Text: `ï"}`},
		{Kind: llm.ChunkToolUse, Index: 5, ID: "t2", Name: "g"},
		{Kind: llm.ChunkEnd, Response: resp},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("chunks (-want +got):\n%s", d)
	}

	var acc llm.Accumulator
	for _, c := range got[:len(got)-1] {
		require.NoError(t, acc.Add(c))
	}
	_, err := acc.Response()
	require.ErrorIs(t, err, llm.ErrIncompleteStream)
	wantMsg := message.Message{Role: message.Assistant, Parts: []message.Part{
		message.Thinking("héllo wörld", "sig"),
		message.Text("Grüße, 世界!"),
		message.Text(""),
		message.Text(`{"a":1}`),
		message.ToolUse("t1", "f", json.RawMessage(`{"q":"ünï"}`)),
		message.ToolUse("t2", "g", json.RawMessage{}),
	}}
	if d := cmp.Diff(wantMsg, acc.Message()); d != "" {
		t.Fatalf("assembled message (-want +got):\n%s", d)
	}
	require.NoError(t, acc.Add(got[len(got)-1]))
	r, err := acc.Response()
	require.NoError(t, err)
	require.Same(t, resp, r)
}

func TestResponseChunksBreak(t *testing.T) {
	// Stopping after any chunk stops the sequence there.
	all := slices.Collect(llm.ResponseChunks(reply, 3))
	for n := 1; n <= len(all); n++ {
		var got []llm.Chunk
		for c := range llm.ResponseChunks(reply, 3) {
			got = append(got, c)
			if len(got) == n {
				break
			}
		}
		require.Equal(t, all[:n], got)
	}
}

func TestAccumulatorRejects(t *testing.T) {
	end := llm.Chunk{Kind: llm.ChunkEnd, Response: reply}
	text := llm.Chunk{Kind: llm.ChunkText, Text: "x"}
	tests := []struct {
		name   string
		chunks []llm.Chunk
	}{
		{"unknown kind", []llm.Chunk{{Kind: 99}}},
		{"zero kind", []llm.Chunk{{}}},
		{"after the end", []llm.Chunk{end, text}},
		{"second end", []llm.Chunk{end, end}},
		{"end without a response", []llm.Chunk{{Kind: llm.ChunkEnd}}},
		{"block not started", []llm.Chunk{{Kind: llm.ChunkText, Index: 1}}},
		{"negative index", []llm.Chunk{{Kind: llm.ChunkText, Index: -1}}},
		{"input before its tool use", []llm.Chunk{{Kind: llm.ChunkToolInput, Text: "{}"}}},
		{"kind changes", []llm.Chunk{text, {Kind: llm.ChunkThinking, Text: "y"}}},
		{"input to a text block", []llm.Chunk{text, {Kind: llm.ChunkToolInput, Text: "{}"}}},
		{"tool use started twice", []llm.Chunk{{Kind: llm.ChunkToolUse, ID: "a"}, {Kind: llm.ChunkToolUse, ID: "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var acc llm.Accumulator
			var err error
			for _, c := range tt.chunks {
				if err = acc.Add(c); err != nil {
					break
				}
			}
			require.ErrorIs(t, err, llm.ErrInvalidChunk)
			_, err = llm.Collect(chunkSeq(tt.chunks))
			require.ErrorIs(t, err, llm.ErrInvalidChunk)
		})
	}
}

func TestCollectIncomplete(t *testing.T) {
	// A stream that stops short without an error is not a reply.
	chunks := slices.Collect(llm.ResponseChunks(reply, 5))
	_, err := llm.Collect(chunkSeq(chunks[:len(chunks)-1]))
	require.ErrorIs(t, err, llm.ErrIncompleteStream)

	// The stream's own error comes back as it is.
	boom := errors.New("boom")
	_, err = llm.Collect(func(yield func(llm.Chunk, error) bool) {
		if yield(chunks[0], nil) {
			yield(llm.Chunk{}, boom)
		}
	})
	require.Same(t, boom, err)
}

func TestChunkKindString(t *testing.T) {
	for k, want := range map[llm.ChunkKind]string{
		llm.ChunkText: "text", llm.ChunkThinking: "thinking", llm.ChunkToolUse: "tool_use",
		llm.ChunkToolInput: "tool_input", llm.ChunkEnd: "end", 42: "ChunkKind(42)",
	} {
		require.Equal(t, want, k.String())
	}
}

// FuzzAccumulator feeds the accumulator arbitrary chunk sequences: it
// never panics, accepts a sequence only if each chunk fits the ones before
// it, and assembles what ResponseChunks cut, in pieces of any size, back
// into the reply's parts.
func FuzzAccumulator(f *testing.F) {
	f.Add([]byte{1, 0, 3, 0, 4, 0, 1, 1, 5, 0}, "Héllo, wörld", "sig", `{"city":"Paris"}`, 3)
	f.Add([]byte{4, 1, 4, 0, 2, 2, 9, 9}, "", "", "", 0)
	f.Fuzz(func(t *testing.T, seq []byte, text, sig, input string, size int) {
		// Random sequences: kinds and indexes from pairs of bytes.
		var acc llm.Accumulator
		accepted := 0
		for i := 0; i+1 < len(seq); i += 2 {
			c := llm.Chunk{Kind: llm.ChunkKind(seq[i] % 7), Index: int(seq[i+1]%5) - 1, Text: text, Signature: sig}
			if c.Kind == llm.ChunkEnd && seq[i+1]%2 == 0 {
				c.Response = reply
			}
			if acc.Add(c) == nil {
				accepted++
			}
		}
		if len(acc.Message().Parts) > accepted {
			t.Fatalf("%d parts from %d accepted chunks", len(acc.Message().Parts), accepted)
		}

		// Round trip.
		resp := &llm.Response{Message: message.Message{Role: message.Assistant, Parts: []message.Part{
			message.Thinking(text, sig),
			message.Text(text),
			message.ToolUse("id", "name", json.RawMessage(input)),
		}}}
		got, err := llm.Collect(func(yield func(llm.Chunk, error) bool) {
			var acc llm.Accumulator
			for c := range llm.ResponseChunks(resp, size%64) {
				if err := acc.Add(c); err != nil {
					t.Fatalf("chunk %+v: %v", c, err)
				}
				if c.Kind == llm.ChunkEnd {
					want := resp.Message
					want.Parts[2].Data = json.RawMessage(input)
					if d := cmp.Diff(want, acc.Message()); d != "" {
						t.Fatalf("assembled (-want +got):\n%s", d)
					}
				}
				if !yield(c, nil) {
					return
				}
			}
		})
		require.NoError(t, err)
		require.Same(t, resp, got)
	})
}

// collect returns the chunks of a stream that must not fail.
func collect(t *testing.T, seq iter.Seq2[llm.Chunk, error]) []llm.Chunk {
	t.Helper()
	var out []llm.Chunk
	for c, err := range seq {
		require.NoError(t, err)
		out = append(out, c)
	}
	return out
}

// chunkSeq streams chunks without an error.
func chunkSeq(chunks []llm.Chunk) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
	}
}
