package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/anthropic"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/message"
)

// messagesAPI is the adapter on a fake Messages API: fixtures in
// testdata, streamed replies in .sse files.
var messagesAPI = fakeapi.Adapter[anthropic.Config, *anthropic.Model]{
	API:          fakeapi.API{Header: map[string]string{"Request-Id": "req_test"}},
	Provider:     "anthropic",
	New:          anthropic.New,
	DefaultModel: "claude-sonnet-4-5",
}

func TestThinkingReplayedUnchanged(t *testing.T) {
	srv := messagesAPI.NewServer(t, fakeapi.Reply{File: "thinking_tool_use.json"}, fakeapi.Reply{File: "final.json"})
	m := messagesAPI.NewModel(t, srv)
	ctx := context.Background()

	req := &llm.Request{
		Messages: []message.Message{message.UserText("Weather in Paris?")},
		Tools:    []llm.ToolSpec{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
	}
	first, err := m.Generate(ctx, req)
	require.NoError(t, err)

	// Decode the fixture itself to compare against the exact wire values.
	var fixture struct {
		Content []struct {
			Type, Thinking, Signature, Data string
		}
	}
	require.NoError(t, json.Unmarshal(messagesAPI.ReadFile(t, "thinking_tool_use.json"), &fixture))
	thinking, redacted := fixture.Content[0], fixture.Content[1]

	wantParts := []message.Part{
		message.Thinking(thinking.Thinking, thinking.Signature),
		message.Thinking("", redacted.Data),
		message.ToolUse("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", json.RawMessage(`{"city": "Paris"}`)),
	}
	if d := cmp.Diff(wantParts, first.Message.Parts); d != "" {
		t.Fatalf("parts (-want +got):\n%s", d)
	}

	req.Messages = append(req.Messages, first.Message, message.Message{
		Role:  message.Tool,
		Parts: []message.Part{message.ToolResult("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "18°C", false)},
	})
	_, err = m.Generate(ctx, req)
	require.NoError(t, err)

	body := srv.LastBody(t)
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 3)
	asst := msgs[1].(map[string]any)
	require.Equal(t, "assistant", asst["role"])
	want := []any{
		map[string]any{"type": "thinking", "thinking": thinking.Thinking, "signature": thinking.Signature},
		map[string]any{"type": "redacted_thinking", "data": redacted.Data},
		map[string]any{"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather", "input": map[string]any{"city": "Paris"}},
	}
	if d := cmp.Diff(want, asst["content"]); d != "" {
		t.Fatalf("replayed assistant content (-want +got):\n%s", d)
	}
}

func TestSettingsMergedOverDefaults(t *testing.T) {
	messagesAPI.CheckSettings(t, "max_tokens", float64(anthropic.DefaultMaxTokens))
}

func TestStopReasons(t *testing.T) {
	// The reasons named like markov's are in the conformance suite.
	messagesAPI.CheckStopReasons(t, func(wire string) string {
		return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"x"}],"stop_reason":"` + wire + `","usage":{"input_tokens":1,"output_tokens":1}}`
	}, map[string]llm.StopReason{
		"stop_sequence":                 llm.EndTurn,
		"model_context_window_exceeded": llm.MaxTokens,
		"pause_turn":                    llm.PauseTurn,
		"something_new":                 llm.EndTurn,
	})
}

// TestFailures: a bad config, a request without a model and a malformed
// reply fail.
func TestFailures(t *testing.T) {
	messagesAPI.CheckFailures(t, "malformed.json")
}

func TestStreaming(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*anthropic.Config)
		set  llm.Settings
	}{
		{name: "configured", cfg: func(c *anthropic.Config) { c.Stream = true }},
		// The SDK refuses a non-streaming request whose max_tokens could take
		// longer than ten minutes; the model streams it instead.
		{name: "automatic for large max tokens", cfg: func(*anthropic.Config) {}, set: llm.Settings{MaxTokens: 64000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := messagesAPI.NewServer(t, fakeapi.Reply{File: "stream.sse"})
			m := messagesAPI.NewModel(t, srv, tt.cfg)
			resp, err := m.Generate(context.Background(), &llm.Request{
				Messages: []message.Message{message.UserText("Weather in Paris?")},
				Tools:    []llm.ToolSpec{{Name: "get_weather"}},
				Settings: tt.set,
			})
			require.NoError(t, err)
			require.Equal(t, true, srv.LastBody(t)["stream"])
			want := &llm.Response{
				Message: message.Message{Role: message.Assistant, Parts: []message.Part{
					message.Text("Let me check the weather."),
					message.ToolUse("toolu_01T1x1fJ34qAmk2tNTrN7Up7", "get_weather", json.RawMessage(`{"city": "Paris"}`)),
				}},
				StopReason: llm.ToolUse,
				Usage:      llm.Usage{InputTokens: 472, OutputTokens: 89, CacheReadTokens: 128},
				ID:         "msg_01Hq9w938a90dw8x",
				Model:      "claude-sonnet-4-5-20250929",
			}
			if d := cmp.Diff(want, resp); d != "" {
				t.Fatalf("response (-want +got):\n%s", d)
			}
		})
	}
}

func TestStreamingError(t *testing.T) {
	srv := messagesAPI.NewServer(t, fakeapi.Reply{Status: 529, File: "error_529.json"})
	m := messagesAPI.NewModel(t, srv, func(c *anthropic.Config) { c.Stream = true })
	_, err := m.Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 529, apiErr.StatusCode)
	require.True(t, strings.HasPrefix(err.Error(), "anthropic: "))
}

func TestTranscriptMapping(t *testing.T) {
	srv := messagesAPI.NewServer(t, fakeapi.Reply{File: "text.json"})
	_, err := messagesAPI.NewModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{
		message.UserText("first"),
		// Consecutive user messages merge into one turn; empty text and
		// thinking parts in a user message are not sent.
		{Role: message.User, Parts: []message.Part{message.Text("second"), message.Text(""), message.Thinking("x", "y")}},
		{Role: message.Assistant, Parts: []message.Part{
			message.Structured(json.RawMessage(`{"ok":true}`), `{"ok": true}`),
			message.Structured(json.RawMessage(`{"ok":false}`), ""),
		}},
		// Consecutive assistant messages merge too.
		{Role: message.Assistant, Parts: []message.Part{message.Text("and more")}},
		// A message with nothing to send is skipped.
		{Role: message.User, Parts: []message.Part{message.Text("")}},
		message.UserText("third"),
	}})
	require.NoError(t, err)
	messagesAPI.Golden(t, "transcript.request.json", srv.Requests()[0].Body)
}

func TestIgnoreEnvironment(t *testing.T) {
	messagesAPI.CheckEnvironment(t, map[string]string{"ANTHROPIC_API_KEY": "from-env"}, map[string]string{"X-Api-Key": "from-env"})
}
