package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/llm/openai"
	"github.com/markov-agents/markov/message"
)

// chatAPI is the fake Chat Completions API: fixtures in testdata,
// streamed replies in .sse files.
var chatAPI = fakeapi.API{
	Header:       map[string]string{"X-Request-Id": "req_test"},
	ContentTypes: map[string]string{".sse": "text/event-stream"},
}

// newModel returns a hermetic model pointed at srv with retries off.
func newModel(t *testing.T, srv *fakeapi.Server, edit ...func(*openai.Config)) *openai.Model {
	t.Helper()
	return fakeapi.NewModel(t, openai.New, openai.Config{
		APIKey:            "test-key",
		BaseURL:           srv.URL,
		MaxRetries:        new(0),
		IgnoreEnvironment: true,
		DefaultSettings:   llm.Settings{Model: "gpt-4.1"},
	}, edit...)
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
			resp, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
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

func TestMaxTokens(t *testing.T) {
	tests := []struct {
		name   string
		legacy bool
		field  string
		absent string
	}{
		{name: "max_completion_tokens", field: "max_completion_tokens", absent: "max_tokens"},
		{name: "legacy max_tokens", legacy: true, field: "max_tokens", absent: "max_completion_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chatAPI.NewServer(t, fakeapi.Reply{File: "length.json"})
			m := newModel(t, srv, func(c *openai.Config) { c.LegacyMaxTokens = tt.legacy })
			_, err := m.Generate(context.Background(), &llm.Request{
				Messages: []message.Message{message.UserText("Tell me a long story.")},
				Settings: llm.Settings{MaxTokens: 10},
			})
			require.NoError(t, err)
			body := srv.LastBody(t)
			require.EqualValues(t, 10, body[tt.field])
			require.NotContains(t, body, tt.absent)
		})
	}
}

func TestStructuredOutput(t *testing.T) {
	// Property order differs from alphabetical on purpose: the schema must
	// reach the API byte for byte.
	schema := `{"type":"object","properties":{"verdict":{"type":"string","enum":["approve","deny"]},"amount":{"type":"number"},"reasons":{"type":"array","items":{"type":"string"}}},"required":["verdict","amount","reasons"],"additionalProperties":false}`
	tests := []struct {
		name       string
		nonStrict  bool
		outputName string
		wantFormat string
	}{
		{
			name:       "strict",
			outputName: "refund decision",
			wantFormat: `"response_format":{"json_schema":{"name":"refund_decision","strict":true,"schema":` + schema + `},"type":"json_schema"}`,
		},
		{
			name:       "non-strict, unnamed",
			nonStrict:  true,
			wantFormat: `"response_format":{"json_schema":{"name":"output","strict":false,"schema":` + schema + `},"type":"json_schema"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chatAPI.NewServer(t, fakeapi.Reply{File: "structured.json"})
			m := newModel(t, srv, func(c *openai.Config) { c.NonStrictOutput = tt.nonStrict })
			_, err := m.Generate(context.Background(), &llm.Request{
				Messages: []message.Message{message.UserText("Should we refund order 42?")},
				Output:   &llm.OutputSpec{Name: tt.outputName, Schema: json.RawMessage(schema)},
			})
			require.NoError(t, err)
			require.Contains(t, string(srv.Requests()[0].Body), tt.wantFormat)
		})
	}
}

func TestRefusal(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "refusal.json"})
	resp, err := newModel(t, srv).Generate(context.Background(), &llm.Request{
		Messages: []message.Message{message.UserText("Something bad")},
		Output:   &llm.OutputSpec{Name: "x", Schema: json.RawMessage(`{"type":"object"}`)},
	})
	require.NoError(t, err)
	require.Equal(t, llm.Refusal, resp.StopReason)
	require.Equal(t, []message.Part{message.Text("I'm sorry, I cannot assist with that request.")}, resp.Message.Parts)
}

func TestSettingsMergedOverDefaults(t *testing.T) {
	chatAPI.CheckSettings(t, fakeapi.Settings{
		Reply:     "text.json",
		MaxTokens: "max_completion_tokens",
		Model: func(t *testing.T, srv *fakeapi.Server, defaults llm.Settings) llm.Model {
			return newModel(t, srv, func(c *openai.Config) { c.DefaultSettings = defaults })
		},
	})
}

func TestFinishReasons(t *testing.T) {
	tests := []struct {
		wire string
		want llm.StopReason
	}{
		// The others are in the conformance suite's encoding.
		{"function_call", llm.ToolUse},
		{"something_new", llm.EndTurn},
	}
	for _, tt := range tests {
		t.Run(tt.wire, func(t *testing.T) {
			body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"` + tt.wire + `","message":{"role":"assistant","content":"x"}}]}`
			srv := chatAPI.NewServer(t, fakeapi.Reply{Body: body})
			resp, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
			require.NoError(t, err)
			require.Equal(t, tt.want, resp.StopReason)
		})
	}
}

func TestCompatibleServer(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "ollama_text.json"})
	m := newModel(t, srv, func(c *openai.Config) {
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

func TestMalformedResponse(t *testing.T) {
	for _, file := range []string{"malformed.json", "no_choices.json"} {
		t.Run(file, func(t *testing.T) {
			srv := chatAPI.NewServer(t, fakeapi.Reply{File: file})
			_, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "openai: "), "error %q does not name the provider", err)
		})
	}
}

// TestNoModel: a model is the one setting without a default, so a request
// that leaves it unset fails before it is sent. (Requests every adapter
// refuses are in the conformance suite.)
func TestNoModel(t *testing.T) {
	srv := chatAPI.NewServer(t)
	m := newModel(t, srv, func(c *openai.Config) { c.DefaultSettings = llm.Settings{} })
	_, err := m.Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.ErrorContains(t, err, "no model")
	require.Empty(t, srv.Requests())
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := openai.New(openai.Config{MaxRetries: new(-1)})
	require.ErrorIs(t, err, llm.ErrInvalidConfig)
	_, err = openai.New(openai.Config{DefaultSettings: llm.Settings{MaxTokens: -1}})
	require.ErrorIs(t, err, llm.ErrInvalidConfig)
}

func TestIgnoreEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "from-env")
	t.Setenv("OPENAI_ORG_ID", "org-from-env")
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "text.json"}, fakeapi.Reply{File: "text.json"})

	_, err := newModel(t, srv, func(c *openai.Config) { c.APIKey = "" }).
		Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.NoError(t, err)
	_, err = newModel(t, srv, func(c *openai.Config) { c.APIKey = ""; c.IgnoreEnvironment = false }).
		Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.NoError(t, err)

	reqs := srv.Requests()
	require.Empty(t, reqs[0].Header.Get("Authorization"))
	require.Empty(t, reqs[0].Header.Get("OpenAI-Organization"))
	require.Equal(t, "Bearer from-env", reqs[1].Header.Get("Authorization"))
	require.Equal(t, "org-from-env", reqs[1].Header.Get("OpenAI-Organization"))
}

func TestTranscriptMapping(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "text.json"})
	_, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{
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
