package anthropic_test

import (
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/message"
)

// TestStreamFixtures: recorded event streams assemble into the reply the
// JSON fixture of the same reply gives.
func TestStreamFixtures(t *testing.T) {
	weather := []llm.ToolSpec{
		{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string"}}}`)},
		{Name: "get_time"},
	}
	messagesAPI.CheckStreams(t, []fakeapi.StreamCase{
		{Name: "text", File: "text.json", Stream: "text.sse"},
		{Name: "thinking with signature and redacted thinking", File: "thinking_tool_use.json", Stream: "thinking_tool_use.sse", Request: &llm.Request{
			Messages: []message.Message{message.UserText("Weather in Paris?")},
			Tools:    weather[:1],
		}},
		{Name: "parallel tool calls", File: "parallel_tools.json", Stream: "parallel_tools.sse", Request: &llm.Request{
			Messages: []message.Message{message.UserText("Weather in Paris and Tokyo, and the time?")},
			Tools:    weather,
		}},
	})
}

// TestStreamFailures: an error event, a stream without message_stop and a
// cut connection fail the stream.
func TestStreamFailures(t *testing.T) {
	incomplete := func(t *testing.T, err error) { require.ErrorIs(t, err, llm.ErrIncompleteStream) }
	messagesAPI.CheckStreamFailures(t, []fakeapi.StreamFailure{
		{Name: "error event", Stream: "error_mid_stream.sse", Check: func(t *testing.T, err error) {
			var apiErr *sdk.Error
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, "overloaded_error", string(apiErr.Type()))
			require.Equal(t, "req_test", apiErr.RequestID)
		}},
		{Name: "no message_stop", Stream: "truncated.sse", Check: incomplete},
		{Name: "connection cut", Stream: "truncated.sse", Abort: true, Check: func(t *testing.T, err error) {
			require.False(t, errors.Is(err, llm.ErrIncompleteStream), "a cut connection is a transport error: %v", err)
		}},
	})
}

// FuzzStream: no event stream makes streaming panic, or end both as a
// reply and an error.
func FuzzStream(f *testing.F) {
	messagesAPI.FuzzStream(f, "text.sse", "thinking_tool_use.sse", "parallel_tools.sse", "error_mid_stream.sse", "truncated.sse", "stream.sse")
}
