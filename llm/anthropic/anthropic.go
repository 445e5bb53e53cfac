// Package anthropic is an [llm.Model] backed by Anthropic's Messages API,
// through the official SDK (github.com/anthropics/anthropic-sdk-go).
//
// # Mapping
//
// A request becomes one Messages API call:
//
//   - System is sent as the system prompt.
//   - User messages become user messages of text blocks.
//   - Assistant messages become assistant messages: text, tool_use (the
//     input replayed as raw JSON), thinking (text and signature replayed
//     unchanged; a thinking part with an empty Text and a Signature is sent
//     as a redacted_thinking block whose data is the Signature) and
//     structured parts (sent as text).
//   - Tool messages become user messages of tool_result blocks, in the
//     order of the tool uses they answer, with is_error set on failures.
//   - Consecutive messages that map to the same role are merged into one,
//     since the API wants user and assistant turns to alternate. Record
//     messages are never sent; [llm.CheckPairing] rejects them, along with
//     any unpaired tool use, before anything goes over the wire.
//   - Tools are sent with their JSON Schema as input_schema, byte for byte.
//   - Settings: the request's settings are merged over
//     [Config.DefaultSettings] with [llm.Settings.Merge]; the model must be
//     set by one of them, and max_tokens defaults to [DefaultMaxTokens].
//
// Structured output uses the API's native JSON-schema output format
// (output_config.format of type json_schema, "structured outputs"): the
// model's reply text is constrained to the schema, and every text block of
// the reply that is valid JSON comes back as a [message.Structured] part
// (Data is the JSON, Text the raw text). Text that is not JSON (for example
// a refusal) stays a text part.
//
// A reply maps back in block order: text, tool_use (the raw JSON input),
// thinking (with its signature) and redacted_thinking (data in Signature,
// empty Text). Stop reasons: end_turn and stop_sequence become
// [llm.EndTurn], tool_use [llm.ToolUse], max_tokens and
// model_context_window_exceeded [llm.MaxTokens], pause_turn
// [llm.PauseTurn], refusal [llm.Refusal]; anything else [llm.EndTurn].
// Usage reports input and output tokens and cache reads and writes.
//
// # Errors and retries
//
// Errors are wrapped with the prefix "anthropic: ". API errors keep the
// SDK's error type, *anthropic.Error of github.com/anthropics/anthropic-sdk-go,
// reachable with [errors.As]: it carries the status code, the request ID and
// the error type ("rate_limit_error", "overloaded_error", ...). Retries (408,
// 409, 429, 5xx including 529 overloaded, connection errors) are the SDK's
// own, configured with [Config.MaxRetries].
//
// Extended thinking and other provider features markov does not model can be
// switched on through [Config.RequestOptions], for example
// option.WithJSONSet("thinking", ...); the thinking blocks they produce are
// kept and replayed as described above.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/adapter"
	"github.com/markov-agents/markov/message"
)

// DefaultMaxTokens is the max_tokens sent when neither the request nor
// [Config.DefaultSettings] sets one (the API requires it).
const DefaultMaxTokens = 4096

// Config configures a [Model]. The zero value is usable when the
// ANTHROPIC_API_KEY environment variable is set and every request names a
// model in its settings.
type Config struct {
	// APIKey authenticates requests. Empty means the SDK's environment
	// defaults: ANTHROPIC_API_KEY, then ANTHROPIC_AUTH_TOKEN and profiles
	// (unless IgnoreEnvironment is set).
	APIKey string
	// BaseURL overrides the API address (a proxy, a gateway, a test
	// server). Empty means ANTHROPIC_BASE_URL, then the production API.
	BaseURL string
	// HTTPClient sends the requests. Nil means the SDK's default client.
	HTTPClient *http.Client
	// MaxRetries is how often the SDK retries a failed request (429, 5xx,
	// 529, connection errors) with backoff. Nil means the SDK's default (2);
	// point it at 0 to disable retries.
	MaxRetries *int
	// DefaultSettings apply to every request; a request's own settings are
	// merged over them with [llm.Settings.Merge]. A zero MaxTokens means
	// [DefaultMaxTokens]. The model has no default: set it here or in every
	// request.
	DefaultSettings llm.Settings
	// Stream sends every request with streaming and accumulates the events
	// into one reply. Without it, streaming is still used for a request the
	// SDK would refuse to send without streaming (a max_tokens large enough
	// that the call may take longer than ten minutes).
	Stream bool
	// IgnoreEnvironment stops the SDK from reading ANTHROPIC_* environment
	// variables and profile files, so only this Config counts. Tests set it
	// to be hermetic.
	IgnoreEnvironment bool
	// RequestOptions are passed to the SDK client after the options built
	// from the fields above, so they take precedence.
	RequestOptions []option.RequestOption
}

// Model is an [llm.Model] that calls Anthropic's Messages API. It is safe for
// concurrent use.
type Model struct {
	client   anthropic.Client
	opts     []option.RequestOption
	defaults llm.Settings
	stream   bool
}

var _ llm.Model = (*Model)(nil)

// setters are the SDK's constructors of the options adapter builds.
var setters = adapter.Setters[option.RequestOption]{
	APIKey:     option.WithAPIKey,
	BaseURL:    option.WithBaseURL,
	HTTPClient: func(c *http.Client) option.RequestOption { return option.WithHTTPClient(c) },
	MaxRetries: option.WithMaxRetries,
}

// New returns a Model configured by cfg.
func New(cfg Config) (*Model, error) {
	var extra []option.RequestOption
	if cfg.IgnoreEnvironment {
		extra = append(extra, option.WithoutEnvironmentDefaults())
	}
	opts, err := adapter.Options(adapter.Conn{
		Provider: "anthropic", APIKey: cfg.APIKey, BaseURL: cfg.BaseURL,
		HTTPClient: cfg.HTTPClient, MaxRetries: cfg.MaxRetries, MaxTokens: cfg.DefaultSettings.MaxTokens,
	}, setters, append(extra, cfg.RequestOptions...)...)
	if err != nil {
		return nil, err
	}
	client := anthropic.NewClient(opts...)
	return &Model{
		client:   client,
		opts:     client.Options,
		defaults: cfg.DefaultSettings,
		stream:   cfg.Stream,
	}, nil
}

// ProviderName names the provider for telemetry: "anthropic" (llm.ProviderNamer).
func (m *Model) ProviderName() string { return "anthropic" }

// Generate sends req to the Messages API and returns the reply. A nil request
// or a transcript that fails [llm.CheckPairing] is rejected before any
// request is made ([llm.CheckRequest]).
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := adapter.Prepare("anthropic", req, m.params)
	if err != nil {
		return nil, err
	}
	if m.stream || m.needsStreaming(params) {
		return llm.Collect(adapter.Chunks("anthropic", func(yield func(llm.Chunk, error) bool) error {
			return m.streamCall(ctx, params, req.Output != nil, yield)
		}))
	}
	reply, err := m.client.Messages.New(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	if reply == nil {
		return nil, errors.New("anthropic: empty response")
	}
	return toResponse(reply, req.Output != nil), nil
}

// needsStreaming reports whether the SDK would refuse params without
// streaming.
func (m *Model) needsStreaming(params anthropic.MessageNewParams) bool {
	_, err := anthropic.CalculateNonStreamingTimeout(int(params.MaxTokens), params.Model, m.opts)
	return err != nil
}

// params maps req onto the Messages API.
func (m *Model) params(req *llm.Request) (anthropic.MessageNewParams, error) {
	s, err := adapter.Settings(m.defaults, req.Settings)
	if err != nil {
		return anthropic.MessageNewParams{}, err
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = DefaultMaxTokens
	}
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(s.Model),
		MaxTokens: int64(s.MaxTokens),
		Messages:  messages(req.Messages),
	}
	if s.Temperature != nil {
		p.Temperature = anthropic.Float(*s.Temperature)
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: toolParam(t)})
	}
	if req.Output != nil {
		schema := json.RawMessage(bytes.TrimSpace(req.Output.Schema))
		// Override keeps the schema's bytes (and so its property order,
		// which the model follows) instead of round-tripping it through a
		// map.
		p.OutputConfig.Format = param.Override[anthropic.JSONOutputFormatParam](map[string]any{
			"type":   "json_schema",
			"schema": schema,
		})
	}
	return p, nil
}

// toolParam maps a tool spec (checked by llm.CheckRequest), sending its
// schema unchanged.
func toolParam(t llm.ToolSpec) *anthropic.ToolParam {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	schema = bytes.TrimSpace(schema)
	tool := &anthropic.ToolParam{
		Name:        t.Name,
		InputSchema: param.Override[anthropic.ToolInputSchemaParam](schema),
	}
	if t.Description != "" {
		tool.Description = anthropic.String(t.Description)
	}
	return tool
}

// messages maps the transcript, merging consecutive messages of the same
// API role. The transcript has passed llm.CheckPairing.
func messages(msgs []message.Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	for i := range msgs {
		msg := &msgs[i]
		var role anthropic.MessageParamRole
		var blocks []anthropic.ContentBlockParamUnion
		switch msg.Role {
		case message.User:
			role = anthropic.MessageParamRoleUser
			blocks = userBlocks(msg.Parts)
		case message.Assistant:
			role = anthropic.MessageParamRoleAssistant
			blocks = assistantBlocks(msg.Parts)
		case message.Tool:
			role = anthropic.MessageParamRoleUser
			blocks = toolBlocks(adapter.ToolResults(msgs, i), msg.Parts)
		default:
			continue // Record: never sent.
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: blocks})
	}
	return out
}

func userBlocks(parts []message.Part) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, p := range parts {
		if t := adapter.PartText(p); t != "" {
			out = append(out, anthropic.NewTextBlock(t))
		}
	}
	return out
}

func assistantBlocks(parts []message.Part) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Kind {
		case message.KindText, message.KindStructured:
			if t := adapter.PartText(p); t != "" {
				out = append(out, anthropic.NewTextBlock(t))
			}
		case message.KindToolUse:
			input := p.Data
			if len(input) == 0 {
				input = json.RawMessage(`{}`)
			}
			out = append(out, anthropic.NewToolUseBlock(p.ID, input, p.Name))
		case message.KindThinking:
			if p.Text == "" && p.Signature != "" {
				out = append(out, anthropic.NewRedactedThinkingBlock(p.Signature))
			} else {
				out = append(out, anthropic.NewThinkingBlock(p.Signature, p.Text))
			}
		}
	}
	return out
}

// toolBlocks maps a Tool message: its results (in the order of the tool
// uses they answer), then any text of its parts.
func toolBlocks(results, parts []message.Part) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, r := range results {
		b := anthropic.ToolResultBlockParam{ToolUseID: r.ID}
		if r.Text != "" {
			b.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: r.Text}}}
		}
		if r.IsError {
			b.IsError = anthropic.Bool(true)
		}
		out = append(out, anthropic.ContentBlockParamUnion{OfToolResult: &b})
	}
	for _, p := range parts {
		if t := adapter.PartText(p); t != "" {
			out = append(out, anthropic.NewTextBlock(t))
		}
	}
	return out
}

// toResponse maps a reply back to markov's model.
func toResponse(r *anthropic.Message, structured bool) *llm.Response {
	msg := message.Message{Role: message.Assistant}
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			msg.Parts = append(msg.Parts, adapter.ReplyText(b.Text, structured))
		case "tool_use":
			input := append(json.RawMessage(nil), b.Input...)
			if len(input) == 0 {
				input = json.RawMessage(`{}`)
			}
			msg.Parts = append(msg.Parts, message.ToolUse(b.ID, b.Name, input))
		case "thinking":
			msg.Parts = append(msg.Parts, message.Thinking(b.Thinking, b.Signature))
		case "redacted_thinking":
			msg.Parts = append(msg.Parts, message.Thinking("", b.Data))
		}
	}
	return &llm.Response{
		ID:         r.ID,
		Model:      string(r.Model),
		Message:    msg,
		StopReason: stopReason(r.StopReason),
		Usage: llm.Usage{
			InputTokens:      int(r.Usage.InputTokens),
			OutputTokens:     int(r.Usage.OutputTokens),
			CacheReadTokens:  int(r.Usage.CacheReadInputTokens),
			CacheWriteTokens: int(r.Usage.CacheCreationInputTokens),
		},
	}
}

func stopReason(r anthropic.StopReason) llm.StopReason {
	switch r {
	case anthropic.StopReasonToolUse:
		return llm.ToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return llm.MaxTokens
	case anthropic.StopReasonPauseTurn:
		return llm.PauseTurn
	case anthropic.StopReasonRefusal:
		return llm.Refusal
	}
	return llm.EndTurn
}
