// Package openai is an [llm.Model] backed by the OpenAI Chat Completions API,
// through the official SDK (github.com/openai/openai-go/v3). It works with
// OpenAI-compatible servers too (Ollama, vLLM, LM Studio, gateways): point
// [Config.BaseURL] at them, for example "http://localhost:11434/v1/".
//
// # Mapping
//
// A request becomes one chat completion:
//
//   - System is sent as a system message.
//   - User messages become user messages; their text parts are joined with
//     a blank line into one string, the most widely supported shape.
//   - Assistant messages become assistant messages: the text (and
//     structured) parts joined as content, tool uses as function tool_calls
//     whose arguments are the input JSON as a string. Thinking parts are
//     dropped: Chat Completions has no way to replay them.
//   - Tool messages become one tool message per result, in the order of the
//     tool uses they answer. Chat Completions has no error flag, so the
//     content of a failed result is prefixed with [ErrorPrefix] ("error: ").
//     Text parts of a Tool message, if any, follow as a user message.
//   - Record messages are never sent; [llm.CheckPairing] rejects them, along
//     with any unpaired tool use, before anything goes over the wire.
//   - Tools are function tools whose parameters are the JSON Schema, byte
//     for byte (not strict).
//   - Settings: the request's settings are merged over
//     [Config.DefaultSettings] with [llm.Settings.Merge]; the model must be
//     set by one of them. MaxTokens is sent as max_completion_tokens (or
//     max_tokens with [Config.LegacyMaxTokens]); zero sends none, leaving
//     the server's default.
//
// Structured output uses response_format of type json_schema, strict unless
// [Config.NonStrictOutput] is set, named after [llm.OutputSpec.Name]
// (reduced to the characters the API accepts, "output" when empty). A reply
// whose content is valid JSON comes back as a [message.Structured] part (Data
// is the JSON, Text the raw content); anything else stays a text part.
//
// A reply maps back to one assistant message: the content as a text part,
// then the function tool calls as tool-use parts (arguments that are not
// valid JSON are kept as a JSON string, so decoding the input fails and the
// model sees a tool error rather than the run failing). A refusal becomes a
// text part and [llm.Refusal]. finish_reason: stop becomes [llm.EndTurn],
// tool_calls and function_call [llm.ToolUse], length [llm.MaxTokens],
// content_filter [llm.Refusal]; anything else [llm.EndTurn].
//
// Usage follows the meaning the Anthropic adapter gives it: InputTokens
// counts the prompt tokens not read from or written to the cache,
// CacheReadTokens the cached ones (prompt_tokens_details.cached_tokens) and
// CacheWriteTokens the ones written (prompt_tokens_details.cache_write_tokens,
// where the server reports them). So InputTokens + CacheReadTokens +
// CacheWriteTokens is the API's prompt_tokens.
//
// # Streaming
//
// A Model is an [llm.Streamer]: [Model.Stream] sends the completion with
// streaming and usage (stream_options.include_usage), yields the deltas,
// then the reply Generate would return for the same completion. An error
// chunk or a stream that ends without [DONE] is an error, never a complete
// reply.
//
// # Errors and retries
//
// Errors are wrapped with the prefix "openai: ". API errors keep the SDK's
// error type, *openai.Error of github.com/openai/openai-go/v3, reachable with
// [errors.As]: it carries the status code and the error's code, type and
// message. Retries (408, 409, 429, 5xx, connection errors) are the SDK's
// own, configured with [Config.MaxRetries].
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/adapter"
	"github.com/markov-agents/markov/message"
)

// ErrorPrefix starts the content of a tool message that carries a failed
// tool result, since Chat Completions has no error flag.
const ErrorPrefix = "error: "

// Config configures a [Model]. The zero value is usable when the
// OPENAI_API_KEY environment variable is set and every request names a model
// in its settings.
type Config struct {
	// APIKey authenticates requests (sent as a bearer token). Empty means
	// OPENAI_API_KEY (unless IgnoreEnvironment is set); local servers that
	// need no key work with none.
	APIKey string
	// BaseURL is the API address, for example "http://localhost:11434/v1/"
	// for Ollama. Empty means OPENAI_BASE_URL, then the OpenAI API.
	BaseURL string
	// HTTPClient sends the requests. Nil means the SDK's default client.
	HTTPClient *http.Client
	// MaxRetries is how often the SDK retries a failed request (429, 5xx,
	// connection errors) with backoff. Nil means the SDK's default (2);
	// point it at 0 to disable retries.
	MaxRetries *int
	// DefaultSettings apply to every request; a request's own settings are
	// merged over them with [llm.Settings.Merge]. The model has no default:
	// set it here or in every request. A zero MaxTokens sends no limit.
	DefaultSettings llm.Settings
	// LegacyMaxTokens sends the limit as max_tokens instead of
	// max_completion_tokens, for older compatible servers. OpenAI's
	// reasoning models reject max_tokens.
	LegacyMaxTokens bool
	// NonStrictOutput sends structured-output schemas with strict set to
	// false, for schemas outside the subset strict mode accepts (every
	// property required, additionalProperties false, ...).
	NonStrictOutput bool
	// IgnoreEnvironment stops the SDK from reading OPENAI_* environment
	// variables (API key, base URL, organization, project, custom
	// headers), so only this Config counts. Tests set it to be hermetic.
	IgnoreEnvironment bool
	// RequestOptions are passed to the SDK after the options built from the
	// fields above, so they take precedence.
	RequestOptions []option.RequestOption
}

// Model is an [llm.Model] that calls the Chat Completions API. It is safe for
// concurrent use.
type Model struct {
	completions     openai.ChatCompletionService
	defaults        llm.Settings
	legacyMaxTokens bool
	strict          bool
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
	opts, err := adapter.Options(adapter.Conn{
		Provider: "openai", APIKey: cfg.APIKey, BaseURL: cfg.BaseURL,
		HTTPClient: cfg.HTTPClient, MaxRetries: cfg.MaxRetries, MaxTokens: cfg.DefaultSettings.MaxTokens,
	}, setters, cfg.RequestOptions...)
	if err != nil {
		return nil, err
	}
	m := &Model{
		defaults:        cfg.DefaultSettings,
		legacyMaxTokens: cfg.LegacyMaxTokens,
		strict:          !cfg.NonStrictOutput,
	}
	if cfg.IgnoreEnvironment {
		// The client constructor always reads OPENAI_*; the service alone
		// takes only what it is given.
		base := []option.RequestOption{option.WithEnvironmentProduction()}
		m.completions = openai.NewChatCompletionService(append(base, opts...)...)
	} else {
		m.completions = openai.NewClient(opts...).Chat.Completions
	}
	return m, nil
}

// ProviderName names the provider for telemetry: "openai" (also for compatible endpoints reached through BaseURL) (llm.ProviderNamer).
func (m *Model) ProviderName() string { return "openai" }

// Generate sends req to the Chat Completions API and returns the reply. A nil
// request or a transcript that fails [llm.CheckPairing] is rejected before
// any request is made ([llm.CheckRequest]).
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := adapter.Prepare("openai", req, m.params)
	if err != nil {
		return nil, err
	}
	completion, err := m.completions.New(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	resp, err := toResponse(completion, req.Output != nil)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return resp, nil
}

// params maps req onto the Chat Completions API.
func (m *Model) params(req *llm.Request) (openai.ChatCompletionNewParams, error) {
	s, err := adapter.Settings(m.defaults, req.Settings)
	if err != nil {
		return openai.ChatCompletionNewParams{}, err
	}
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(s.Model)}
	if s.MaxTokens > 0 {
		if m.legacyMaxTokens {
			p.MaxTokens = openai.Int(int64(s.MaxTokens))
		} else {
			p.MaxCompletionTokens = openai.Int(int64(s.MaxTokens))
		}
	}
	if s.Temperature != nil {
		p.Temperature = openai.Float(*s.Temperature)
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	p.Messages = append(p.Messages, messages(req.Messages)...)
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, toolParam(t))
	}
	if req.Output != nil {
		schema := json.RawMessage(bytes.TrimSpace(req.Output.Schema))
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:   schemaName(req.Output.Name),
				Strict: openai.Bool(m.strict),
				Schema: schema,
			},
		}
	}
	return p, nil
}

// functionDef is a function definition on the wire; it keeps the parameters'
// bytes (and so their property order) instead of round-tripping them through
// a map.
type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// toolParam maps a tool spec (checked by llm.CheckRequest), sending its
// schema unchanged.
func toolParam(t llm.ToolSpec) openai.ChatCompletionToolUnionParam {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	schema = bytes.TrimSpace(schema)
	return openai.ChatCompletionFunctionTool(param.Override[shared.FunctionDefinitionParam](functionDef{
		Name:        t.Name,
		Description: t.Description,
		Parameters:  schema,
	}))
}

// schemaName reduces name to what response_format accepts:
// ^[a-zA-Z0-9_-]{1,64}$.
func schemaName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() == 64 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "output"
	}
	return b.String()
}

// messages maps the transcript. It has passed llm.CheckPairing.
func messages(msgs []message.Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	for i := range msgs {
		msg := &msgs[i]
		switch msg.Role {
		case message.User:
			if text := joinText(msg.Parts); text != "" {
				out = append(out, openai.UserMessage(text))
			}
		case message.Assistant:
			if a, ok := assistantMessage(msg.Parts); ok {
				out = append(out, a)
			}
		case message.Tool:
			out = append(out, toolMessages(adapter.ToolResults(msgs, i), msg.Parts)...)
		}
	}
	return out
}

// joinText joins the text and structured parts with blank lines.
func joinText(parts []message.Part) string {
	var texts []string
	for _, p := range parts {
		if t := adapter.PartText(p); t != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, "\n\n")
}

func assistantMessage(parts []message.Part) (openai.ChatCompletionMessageParamUnion, bool) {
	var a openai.ChatCompletionAssistantMessageParam
	if text := joinText(parts); text != "" {
		a.Content.OfString = openai.String(text)
	}
	for _, p := range parts {
		if p.Kind != message.KindToolUse {
			continue
		}
		args := string(p.Data)
		if args == "" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: p.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      p.Name,
					Arguments: args,
				},
			},
		})
	}
	if param.IsOmitted(a.Content.OfString) && len(a.ToolCalls) == 0 {
		return openai.ChatCompletionMessageParamUnion{}, false // thinking only
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, true
}

// toolMessages maps a Tool message: one tool message per result (in the
// order of the tool uses they answer), then any text of its parts as a user
// message.
func toolMessages(results, parts []message.Part) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	for _, r := range results {
		content := r.Text
		if r.IsError {
			content = ErrorPrefix + content
		}
		out = append(out, openai.ToolMessage(content, r.ID))
	}
	if text := joinText(parts); text != "" {
		out = append(out, openai.UserMessage(text))
	}
	return out
}

// toResponse maps the first choice of a completion.
func toResponse(c *openai.ChatCompletion, structured bool) (*llm.Response, error) {
	if c == nil || len(c.Choices) == 0 {
		return nil, errors.New("response has no choices")
	}
	choice := c.Choices[0]
	msg := message.Message{Role: message.Assistant}
	if content := choice.Message.Content; content != "" {
		msg.Parts = append(msg.Parts, adapter.ReplyText(content, structured))
	}
	stop := finishReason(choice.FinishReason)
	if choice.Message.Refusal != "" {
		msg.Parts = append(msg.Parts, message.Text(choice.Message.Refusal))
		stop = llm.Refusal
	}
	for _, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue // custom tools are never offered
		}
		msg.Parts = append(msg.Parts, message.ToolUse(tc.ID, tc.Function.Name, llm.ToolInput([]byte(tc.Function.Arguments))))
	}
	u := c.Usage
	cached := int(u.PromptTokensDetails.CachedTokens)
	written := int(u.PromptTokensDetails.CacheWriteTokens)
	return &llm.Response{
		ID:         c.ID,
		Model:      c.Model,
		Message:    msg,
		StopReason: stop,
		Usage: llm.Usage{
			InputTokens:      max(0, int(u.PromptTokens)-cached-written),
			OutputTokens:     int(u.CompletionTokens),
			CacheReadTokens:  cached,
			CacheWriteTokens: written,
		},
	}, nil
}

// finishReason maps a choice's finish_reason.
func finishReason(r string) llm.StopReason {
	switch r {
	case "tool_calls", "function_call":
		return llm.ToolUse
	case "length":
		return llm.MaxTokens
	case "content_filter":
		return llm.Refusal
	}
	return llm.EndTurn
}
