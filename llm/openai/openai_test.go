package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/llm/openai"
	"github.com/markov-agents/markov/message"
)

// chatAPI is the adapter on a fake Chat Completions API: fixtures in
// testdata, streamed replies in .sse files.
var chatAPI = fakeapi.Adapter[openai.Config, *openai.Model]{
	API:          fakeapi.API{Header: map[string]string{"X-Request-Id": "req_test"}},
	Provider:     "openai",
	New:          openai.New,
	DefaultModel: "gpt-4.1",
}

func TestToolArguments(t *testing.T) {
	tests := []struct {
		name, arguments, want string
	}{
		{"empty become an empty object", ``, `{}`},
		// Kept as a JSON string, so decoding the input fails visibly.
		{"invalid are kept as a string", `{"a": 1`, `"{\"a\": 1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := json.Marshal(tt.arguments)
			require.NoError(t, err)
			body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":` + string(args) + `}}]}}]}`
			srv := chatAPI.NewServer(t, fakeapi.Reply{Body: body})
			resp, err := chatAPI.NewModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
			require.NoError(t, err)
			want := []message.Part{message.ToolUse("call_1", "f", json.RawMessage(tt.want))}
			if d := cmp.Diff(want, resp.Message.Parts); d != "" {
				t.Fatalf("parts (-want +got):\n%s", d)
			}
			require.Equal(t, "c", resp.ID, "the completion's ID, for telemetry")
			require.Equal(t, "m", resp.Model, "the model that answered, for telemetry")
		})
	}
}

// TestConfigShapesRequests: the Config options that change the request
// body (the token limit's field, strict structured output).
func TestConfigShapesRequests(t *testing.T) {
	story := &llm.Request{
		Messages: []message.Message{message.UserText("Tell me a long story.")},
		Settings: llm.Settings{MaxTokens: 10},
	}
	maxTokens := func(field, absent string) func(*testing.T, *fakeapi.Server) {
		return func(t *testing.T, srv *fakeapi.Server) {
			body := srv.LastBody(t)
			require.EqualValues(t, 10, body[field])
			require.NotContains(t, body, absent)
		}
	}
	// Property order differs from alphabetical on purpose: the schema must
	// reach the API byte for byte.
	schema := `{"type":"object","properties":{"verdict":{"type":"string","enum":["approve","deny"]},"amount":{"type":"number"},"reasons":{"type":"array","items":{"type":"string"}}},"required":["verdict","amount","reasons"],"additionalProperties":false}`
	refund := func(output string) *llm.Request {
		return &llm.Request{
			Messages: []message.Message{message.UserText("Should we refund order 42?")},
			Output:   &llm.OutputSpec{Name: output, Schema: json.RawMessage(schema)},
		}
	}
	format := func(name string, strict bool) func(*testing.T, *fakeapi.Server) {
		want := fmt.Sprintf(`"response_format":{"json_schema":{"name":%q,"strict":%t,"schema":%s},"type":"json_schema"}`, name, strict, schema)
		return func(t *testing.T, srv *fakeapi.Server) { require.Contains(t, string(srv.Requests()[0].Body), want) }
	}
	tests := []struct {
		name    string
		edit    func(*openai.Config)
		fixture string
		req     *llm.Request
		check   func(*testing.T, *fakeapi.Server)
	}{
		{"max_completion_tokens", func(*openai.Config) {}, "length.json", story, maxTokens("max_completion_tokens", "max_tokens")},
		{"legacy max_tokens", func(c *openai.Config) { c.LegacyMaxTokens = true }, "length.json", story, maxTokens("max_tokens", "max_completion_tokens")},
		{"strict output", func(*openai.Config) {}, "structured.json", refund("refund decision"), format("refund_decision", true)},
		{"non-strict, unnamed output", func(c *openai.Config) { c.NonStrictOutput = true }, "structured.json", refund(""), format("output", false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chatAPI.NewServer(t, fakeapi.Reply{File: tt.fixture})
			_, err := chatAPI.NewModel(t, srv, tt.edit).Generate(context.Background(), tt.req)
			require.NoError(t, err)
			tt.check(t, srv)
		})
	}
}

func TestRefusal(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "refusal.json"})
	resp, err := chatAPI.NewModel(t, srv).Generate(context.Background(), &llm.Request{
		Messages: []message.Message{message.UserText("Something bad")},
		Output:   &llm.OutputSpec{Name: "x", Schema: json.RawMessage(`{"type":"object"}`)},
	})
	require.NoError(t, err)
	require.Equal(t, llm.Refusal, resp.StopReason)
	require.Equal(t, []message.Part{message.Text("I'm sorry, I cannot assist with that request.")}, resp.Message.Parts)
}

func TestSettingsMergedOverDefaults(t *testing.T) {
	chatAPI.CheckSettings(t, "max_completion_tokens", nil)
}

func TestFinishReasons(t *testing.T) {
	// The others are in the conformance suite's encoding.
	chatAPI.CheckStopReasons(t, func(wire string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"` + wire + `","message":{"role":"assistant","content":"x"}}]}`
	}, map[string]llm.StopReason{"function_call": llm.ToolUse, "something_new": llm.EndTurn})
}

func TestCompatibleServer(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "ollama_text.json"})
	m := chatAPI.NewModel(t, srv, func(c *openai.Config) {
		c.APIKey = "" // local servers need none
		c.BaseURL = srv.URL + "/v1/"
		c.LegacyMaxTokens = true
		c.DefaultSettings = llm.Settings{Model: "llama3.2", MaxTokens: 256}
	})
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Capital of France?")}})
	require.NoError(t, err)
	require.Equal(t, "Paris.", resp.Message.Text())
	require.Equal(t, llm.Usage{InputTokens: 31, OutputTokens: 3}, resp.Usage)
	reqs := srv.Requests()
	require.Equal(t, "/v1/chat/completions", reqs[0].Path)
	require.Empty(t, reqs[0].Header.Get("Authorization"))
	require.EqualValues(t, 256, srv.LastBody(t)["max_tokens"])
}

// TestFailures: a bad config, a request without a model and malformed
// replies fail.
func TestFailures(t *testing.T) {
	chatAPI.CheckFailures(t, "malformed.json", "no_choices.json")
}

func TestIgnoreEnvironment(t *testing.T) {
	chatAPI.CheckEnvironment(t,
		map[string]string{"OPENAI_API_KEY": "from-env", "OPENAI_ORG_ID": "org-from-env"},
		map[string]string{"Authorization": "Bearer from-env", "OpenAI-Organization": "org-from-env"})
}

func TestTranscriptMapping(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "text.json"})
	_, err := chatAPI.NewModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{
		// Text parts of a user message are joined with a blank line.
		{Role: message.User, Parts: []message.Part{message.Text("Weather in Paris?"), message.Text("And in Rome?")}},
		// Thinking (from another provider) is dropped.
		{Role: message.Assistant, Parts: []message.Part{
			message.Thinking("hmm", "sig"),
			message.Text("Checking."),
			message.ToolUse("call_1", "get_weather", json.RawMessage(`{"city":"Paris"}`)),
			message.ToolUse("call_2", "get_weather", json.RawMessage(`{"city":"Rome"}`)),
		}},
		// An empty result is sent as empty content; a failed one is
		// prefixed with ErrorPrefix.
		{Role: message.Tool, Parts: []message.Part{
			message.ToolResult("call_2", "timeout", true),
			message.ToolResult("call_1", "", false),
		}},
		// A structured part is sent as its text.
		{Role: message.Assistant, Parts: []message.Part{message.Structured(json.RawMessage(`{"ok":true}`), `{"ok": true}`)}},
	}})
	require.NoError(t, err)
	chatAPI.Golden(t, "transcript.request.json", srv.Requests()[0].Body)
}
