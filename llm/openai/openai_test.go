package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/llm/openai"
	"github.com/markov-agents/markov/message"
)

// chatAPI is the fake Chat Completions API: fixtures in testdata.
var chatAPI = fakeapi.API{Header: map[string]string{"X-Request-Id": "req_test"}}

// newModel returns a hermetic model pointed at srv with retries off.
func newModel(t *testing.T, srv *fakeapi.Server, edit ...func(*openai.Config)) *openai.Model {
	t.Helper()
	cfg := openai.Config{
		APIKey:            "test-key",
		BaseURL:           srv.URL,
		MaxRetries:        new(0),
		IgnoreEnvironment: true,
		DefaultSettings:   llm.Settings{Model: "gpt-4.1"},
	}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := openai.New(cfg)
	require.NoError(t, err)
	return m
}

func TestGenerateText(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "text.json"})
	m := newModel(t, srv)

	resp, err := m.Generate(context.Background(), &llm.Request{
		System:   "You are terse.",
		Messages: []message.Message{message.UserText("Hi")},
	})
	require.NoError(t, err)

	want := &llm.Response{
		Message:    message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("Hello! How can I help you today?")}},
		StopReason: llm.EndTurn,
		// prompt_tokens 1117 = 93 uncached + 1024 cached.
		Usage: llm.Usage{InputTokens: 93, OutputTokens: 10, CacheReadTokens: 1024},
	}
	if d := cmp.Diff(want, resp); d != "" {
		t.Fatalf("response (-want +got):\n%s", d)
	}

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, http.MethodPost, reqs[0].Method)
	require.Equal(t, "/chat/completions", reqs[0].Path)
	require.Equal(t, "Bearer test-key", reqs[0].Header.Get("Authorization"))
	chatAPI.Golden(t, "text.request.json", reqs[0].Body)
}

func TestToolRoundTrip(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "tool_calls.json"}, fakeapi.Reply{File: "final.json"})
	m := newModel(t, srv)
	ctx := context.Background()

	req := &llm.Request{
		System:   "You handle refunds.",
		Messages: []message.Message{message.UserText("Refund order 42, it arrived broken.")},
		Tools:    []llm.ToolSpec{fakeapi.LookupOrderTool, fakeapi.RefundTool},
	}
	first, err := m.Generate(ctx, req)
	require.NoError(t, err)
	require.Equal(t, llm.ToolUse, first.StopReason)
	wantParts := []message.Part{
		message.Text("I'll look up the order first."),
		message.ToolUse("call_DdmO9pD3xa9XTPNJ32zg2hcA", "lookup_order", json.RawMessage(`{"order_id":42}`)),
	}
	if d := cmp.Diff(wantParts, first.Message.Parts); d != "" {
		t.Fatalf("parts (-want +got):\n%s", d)
	}

	req.Messages = append(req.Messages,
		first.Message,
		message.Message{Role: message.Tool, Parts: []message.Part{
			message.ToolResult("call_DdmO9pD3xa9XTPNJ32zg2hcA", `{"id":42,"status":"delivered","total":42.5}`, false),
		}},
		message.UserText("Please hurry."),
	)
	second, err := m.Generate(ctx, req)
	require.NoError(t, err)
	require.Equal(t, llm.EndTurn, second.StopReason)
	require.Equal(t, "Order 42 has been refunded.", second.Message.Text())

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	chatAPI.Golden(t, "tool_round_trip.request.json", reqs[1].Body)
}

func TestParallelToolCallsAndErrorResult(t *testing.T) {
	srv := chatAPI.NewServer(t, fakeapi.Reply{File: "parallel_tool_calls.json"}, fakeapi.Reply{File: "final.json"})
	m := newModel(t, srv)
	ctx := context.Background()

	req := &llm.Request{
		Messages: []message.Message{message.UserText("Weather in Paris and Tokyo, and the time?")},
		Tools: []llm.ToolSpec{
			{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string"}}}`)},
			{Name: "get_time"}, // no schema: an empty object schema is sent
		},
	}
	first, err := m.Generate(ctx, req)
	require.NoError(t, err)
	require.Equal(t, llm.ToolUse, first.StopReason)
	uses := first.Message.ToolUses()
	require.Len(t, uses, 3)
	require.Len(t, first.Message.Parts, 3, "null content adds no text part")
	require.Equal(t, []string{"call_1", "call_2", "call_3"}, []string{uses[0].ID, uses[1].ID, uses[2].ID})
	require.JSONEq(t, `{"city":"Tokyo","units":"metric"}`, string(uses[1].Data))
	require.JSONEq(t, `{}`, string(uses[2].Data), "empty arguments become an empty object")

	// Results arrive out of order, the second one failed, and a thinking
	// part (from another provider) is dropped.
	first.Message.Parts = append([]message.Part{message.Thinking("hmm", "sig")}, first.Message.Parts...)
	req.Messages = append(req.Messages,
		first.Message,
		message.Message{Role: message.Tool, Parts: []message.Part{
			message.ToolResult("call_3", "12:00 UTC", false),
			message.ToolResult("call_2", "weather service unavailable", true),
			message.ToolResult("call_1", "", false),
		}},
	)
	_, err = m.Generate(ctx, req)
	require.NoError(t, err)
	chatAPI.Golden(t, "parallel_tool_results.request.json", srv.Requests()[1].Body)
}

func TestInvalidToolArguments(t *testing.T) {
	body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": 1"}}]}}]}`
	srv := chatAPI.NewServer(t, fakeapi.Reply{Body: body})
	resp, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.NoError(t, err)
	uses := resp.Message.ToolUses()
	require.Len(t, uses, 1)
	require.True(t, json.Valid(uses[0].Data))
	var s string
	require.NoError(t, json.Unmarshal(uses[0].Data, &s), "invalid arguments are kept as a JSON string")
	require.Equal(t, `{"a": 1`, s)
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
			resp, err := m.Generate(context.Background(), &llm.Request{
				Messages: []message.Message{message.UserText("Tell me a long story.")},
				Settings: llm.Settings{MaxTokens: 10},
			})
			require.NoError(t, err)
			require.Equal(t, llm.MaxTokens, resp.StopReason)
			require.Equal(t, "Once upon a time, in a land far", resp.Message.Text())
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
			resp, err := m.Generate(context.Background(), &llm.Request{
				Messages: []message.Message{message.UserText("Should we refund order 42?")},
				Output:   &llm.OutputSpec{Name: tt.outputName, Schema: json.RawMessage(schema)},
			})
			require.NoError(t, err)
			require.Len(t, resp.Message.Parts, 1)
			p := resp.Message.Parts[0]
			require.Equal(t, message.KindStructured, p.Kind)
			require.JSONEq(t, `{"verdict":"approve","amount":42.5,"reasons":["damaged on arrival"]}`, string(p.Data))
			require.Equal(t, `{"verdict":"approve","amount":42.5,"reasons":["damaged on arrival"]}`, p.Text)
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
	tests := []struct {
		name     string
		defaults llm.Settings
		request  llm.Settings
		want     map[string]any // expected model, max_completion_tokens, temperature (nil = absent)
	}{
		{
			name:     "defaults only",
			defaults: llm.Settings{Model: "gpt-4.1", MaxTokens: 1000, Temperature: llm.Temperature(0.2)},
			want:     map[string]any{"model": "gpt-4.1", "max_completion_tokens": 1000.0, "temperature": 0.2},
		},
		{
			name:     "node overrides max tokens",
			defaults: llm.Settings{Model: "gpt-4.1", MaxTokens: 1000, Temperature: llm.Temperature(0.2)},
			request:  llm.Settings{MaxTokens: 2000},
			want:     map[string]any{"model": "gpt-4.1", "max_completion_tokens": 2000.0, "temperature": 0.2},
		},
		{
			name:     "node overrides model and temperature",
			defaults: llm.Settings{Model: "gpt-4.1", MaxTokens: 1000},
			request:  llm.Settings{Model: "gpt-4.1-mini", Temperature: llm.Temperature(0)},
			want:     map[string]any{"model": "gpt-4.1-mini", "max_completion_tokens": 1000.0, "temperature": 0.0},
		},
		{
			name:     "no max tokens anywhere",
			defaults: llm.Settings{Model: "gpt-4.1"},
			want:     map[string]any{"model": "gpt-4.1", "max_completion_tokens": nil, "temperature": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chatAPI.NewServer(t, fakeapi.Reply{File: "text.json"})
			m := newModel(t, srv, func(c *openai.Config) { c.DefaultSettings = tt.defaults })
			_, err := m.Generate(context.Background(), &llm.Request{
				Messages: []message.Message{message.UserText("Hi")},
				Settings: tt.request,
			})
			require.NoError(t, err)
			body := srv.LastBody(t)
			got := map[string]any{"model": body["model"], "max_completion_tokens": body["max_completion_tokens"], "temperature": body["temperature"]}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("settings (-want +got):\n%s", d)
			}
		})
	}
}

func TestFinishReasons(t *testing.T) {
	tests := []struct {
		wire string
		want llm.StopReason
	}{
		{"stop", llm.EndTurn},
		{"tool_calls", llm.ToolUse},
		{"function_call", llm.ToolUse},
		{"length", llm.MaxTokens},
		{"content_filter", llm.Refusal},
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

func TestAPIErrors(t *testing.T) {
	fast := map[string]string{"Retry-After-Ms": "1"}
	tests := []struct {
		name       string
		replies    []fakeapi.Reply
		retries    int
		wantStatus int
		wantCode   string
		wantCalls  int
	}{
		{
			name:       "429 without retries",
			replies:    []fakeapi.Reply{{Status: 429, File: "error_429.json", Header: fast}},
			wantStatus: 429, wantCode: "rate_limit_exceeded", wantCalls: 1,
		},
		{
			name:       "503 retried once",
			replies:    []fakeapi.Reply{{Status: 503, File: "error_503.json", Header: fast}, {Status: 503, File: "error_503.json", Header: fast}},
			retries:    1,
			wantStatus: 503, wantCalls: 2,
		},
		{
			name:       "500 retried twice",
			replies:    []fakeapi.Reply{{Status: 500, File: "error_500.json", Header: fast}, {Status: 500, File: "error_500.json", Header: fast}, {Status: 500, File: "error_500.json", Header: fast}},
			retries:    2,
			wantStatus: 500, wantCalls: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chatAPI.NewServer(t, tt.replies...)
			m := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = new(tt.retries) })
			_, err := m.Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "openai: "), "error %q does not name the provider", err)
			var apiErr *sdk.Error
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, tt.wantStatus, apiErr.StatusCode)
			require.Equal(t, tt.wantCode, apiErr.Code)
			require.Len(t, srv.Requests(), tt.wantCalls)
		})
	}
}

func TestRetryThenSuccess(t *testing.T) {
	srv := chatAPI.NewServer(t,
		fakeapi.Reply{Status: 429, File: "error_429.json", Header: map[string]string{"Retry-After-Ms": "1"}},
		fakeapi.Reply{File: "text.json"},
	)
	m := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = new(2) })
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.NoError(t, err)
	require.Equal(t, "Hello! How can I help you today?", resp.Message.Text())
	require.Len(t, srv.Requests(), 2)
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

func TestMalformedHistoryNeverSent(t *testing.T) {
	srv := chatAPI.NewServer(t)
	m := newModel(t, srv)
	_, err := m.Generate(context.Background(), &llm.Request{Messages: []message.Message{
		message.UserText("Refund order 42"),
		{Role: message.Assistant, Parts: []message.Part{message.ToolUse("call_1", "refund", json.RawMessage(`{}`))}},
		message.UserText("hello?"),
	}})
	require.ErrorIs(t, err, llm.ErrMalformedHistory)
	require.Contains(t, err.Error(), "call_1")
	require.Empty(t, srv.Requests())
}

func TestRequestErrorsBeforeSending(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*openai.Config)
		req  *llm.Request
		want string
	}{
		{
			name: "no model",
			cfg:  func(c *openai.Config) { c.DefaultSettings = llm.Settings{} },
			req:  &llm.Request{Messages: []message.Message{message.UserText("Hi")}},
			want: "no model",
		},
		{
			name: "tool schema not an object",
			req:  &llm.Request{Messages: []message.Message{message.UserText("Hi")}, Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`"x"`)}}},
			want: `tool "t"`,
		},
		{
			name: "output schema invalid",
			req:  &llm.Request{Messages: []message.Message{message.UserText("Hi")}, Output: &llm.OutputSpec{Name: "o", Schema: json.RawMessage(`{`)}},
			want: `output "o"`,
		},
		{
			name: "nil request",
			want: "nil request",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := chatAPI.NewServer(t)
			var edits []func(*openai.Config)
			if tt.cfg != nil {
				edits = append(edits, tt.cfg)
			}
			_, err := newModel(t, srv, edits...).Generate(context.Background(), tt.req)
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, srv.Requests())
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := openai.New(openai.Config{MaxRetries: new(-1)})
	require.Error(t, err)
	_, err = openai.New(openai.Config{DefaultSettings: llm.Settings{MaxTokens: -1}})
	require.Error(t, err)
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

func TestConcurrentGenerate(t *testing.T) {
	const n = 8
	replies := make([]fakeapi.Reply, n)
	for i := range replies {
		replies[i] = fakeapi.Reply{File: "text.json"}
	}
	srv := chatAPI.NewServer(t, replies...)
	m := newModel(t, srv)
	req := &llm.Request{Messages: []message.Message{message.UserText("Hi")}}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := m.Generate(context.Background(), req)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, srv.Requests(), n)
}

func TestContextCanceled(t *testing.T) {
	srv := chatAPI.NewServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newModel(t, srv).Generate(ctx, &llm.Request{Messages: []message.Message{message.UserText("Hi")}})
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
}
