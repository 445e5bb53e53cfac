package openai_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/message"
)

// TestStreamFixtures: recorded streams assemble into the reply the JSON
// fixture of the same completion gives, usage included.
func TestStreamFixtures(t *testing.T) {
	chatAPI.CheckStreams(t, []fakeapi.StreamCase{
		{Name: "text with cached tokens", File: "text.json", Stream: "text.sse"},
		{Name: "refusal", File: "refusal.json", Stream: "refusal.sse"},
		{Name: "parallel tool calls", File: "parallel_tools.json", Stream: "parallel_tools.sse", Request: &llm.Request{
			Messages: []message.Message{message.UserText("Weather in Paris and Tokyo, and the time?")},
			Tools: []llm.ToolSpec{
				{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string"}}}`)},
				{Name: "get_time"},
			},
		}},
	})
}

// TestStreamAsksForUsage: a streamed call asks for the usage chunk.
func TestStreamAsksForUsage(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "text.sse"})
	_, err := llm.Collect(chatAPI.NewModel(t, srv).Stream(t.Context(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}}))
	require.NoError(t, err)
	body := srv.LastBody(t)
	require.Equal(t, true, body["stream"])
	require.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
}

// TestStreamFailures: an error chunk, a stream without [DONE] and a cut
// connection fail the stream.
func TestStreamFailures(t *testing.T) {
	chatAPI.CheckStreamFailures(t, []fakeapi.StreamFailure{
		{Name: "error chunk", Stream: "error_mid_stream.sse", Check: func(t *testing.T, err error) {
			var streamErr *ssestream.StreamError
			require.ErrorAs(t, err, &streamErr)
			require.Contains(t, streamErr.Message, "The server had an error")
		}},
		{Name: "no [DONE]", Stream: "truncated.sse", Check: func(t *testing.T, err error) {
			require.ErrorIs(t, err, llm.ErrIncompleteStream)
		}},
		{Name: "connection cut", Stream: "truncated.sse", Abort: true, Check: func(t *testing.T, err error) {
			require.False(t, errors.Is(err, llm.ErrIncompleteStream), "a cut connection is a transport error: %v", err)
		}},
	})
}

// FuzzStream: no event stream makes streaming panic, or end both as a
// reply and an error.
func FuzzStream(f *testing.F) {
	chatAPI.FuzzStream(f, "text.sse", "refusal.sse", "parallel_tools.sse", "error_mid_stream.sse", "truncated.sse")
}
