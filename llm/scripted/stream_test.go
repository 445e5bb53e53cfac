package scripted_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/llmtest"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/message"
)

var hi = &llm.Request{Messages: []message.Message{message.UserText("Hi")}}

func TestStreamChunkSize(t *testing.T) {
	reply := scripted.Reply{Thinking: "Think it over.", Signature: "sig", Text: "Hello, wörld!"} // 13 runes
	for size, texts := range map[int]int{0: 2, -1: 2, 1: 13, 3: 5, 100: 1} {
		m := scripted.New(reply, reply).Configure(scripted.Config{ChunkSize: size})
		want, err := m.Generate(context.Background(), hi)
		require.NoError(t, err)
		var chunks []llm.Chunk
		got := llmtest.StreamReply(t, streamFunc(func(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
			return func(yield func(llm.Chunk, error) bool) {
				for c, err := range m.Stream(ctx, req) {
					if c.Kind == llm.ChunkText {
						chunks = append(chunks, c)
					}
					if !yield(c, err) {
						return
					}
				}
			}
		}), hi)
		require.Equal(t, want, got)
		require.Len(t, chunks, texts, "size %d", size)
	}
}

// streamFunc is a function as an llm.Streamer.
type streamFunc func(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error]

func (f streamFunc) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return f(ctx, req)
}

// TestStreamLatency: the reply's latency comes before the first chunk,
// the configured one before each next, and a canceled context ends the
// wait at once.
func TestStreamLatency(t *testing.T) {
	m := scripted.New(scripted.Text("one two three")).Configure(scripted.Config{ChunkSize: 4, ChunkLatency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []llm.Chunk
	var failed error
	for c, err := range m.Stream(ctx, hi) {
		if err != nil {
			failed = err
			continue
		}
		got = append(got, c)
		cancel() // the next chunk is an hour away
	}
	require.ErrorIs(t, failed, context.Canceled)
	require.Equal(t, []llm.Chunk{{Kind: llm.ChunkText, Text: "one "}}, got)

	m = scripted.New(scripted.Reply{Text: "late", Latency: time.Hour})
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err := llm.Collect(m.Stream(ctx, hi))
	require.ErrorIs(t, err, context.Canceled)
}

// TestStreamError: a reply with Err streams its chunks, then fails.
func TestStreamError(t *testing.T) {
	boom := errors.New("boom")
	m := scripted.New(scripted.Reply{Text: "partial answer", Err: boom}).Configure(scripted.Config{ChunkSize: 8})
	err := llmtest.StreamError(t, context.Background(), m, hi)
	require.Same(t, boom, err)
}

// BenchmarkReply compares a reply generated with the same reply streamed
// (in chunks of the default size) and collected.
func BenchmarkReply(b *testing.B) {
	reply := scripted.Reply{
		Text:  "Order A-42 shipped on Monday and should arrive by Thursday.",
		Calls: []scripted.Call{{ID: "toolu_1", Name: "track", Input: `{"order_id":"A-42"}`}},
	}
	model := scripted.Func(func(*llm.Request) (scripted.Reply, error) { return reply, nil })
	ctx := context.Background()
	b.Run("Generate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := model.Generate(ctx, hi); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Stream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := llm.Collect(model.Stream(ctx, hi)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
