// Package llm is the small interface between markov and a language model:
// a Model turns a Request (system prompt, transcript, tool specs, settings)
// into a Response (one assistant message, a stop reason, token usage).
//
// Provider adapters live in llm/anthropic and llm/openai; llm/scripted is a
// deterministic model for tests and offline demos.
package llm

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/markov-agents/markov/message"
)

// Model generates one assistant reply. Implementations must be safe for
// concurrent use: worker leaves call the same model at once. A Model must
// not modify the request; it may keep it, since the machine never changes
// a request's slices after the call.
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// ModelFunc adapts a function to the Model interface.
type ModelFunc func(ctx context.Context, req *Request) (*Response, error)

// Generate calls f.
func (f ModelFunc) Generate(ctx context.Context, req *Request) (*Response, error) {
	return f(ctx, req)
}

// Request is one inference call.
type Request struct {
	// System is the system prompt.
	System string
	// Messages is the transcript of the calling leaf, oldest first. Every
	// tool use is answered by a tool result in the message after it. It is
	// shared with the caller: read it, never modify it.
	Messages []message.Message
	// Tools the model may call, in a stable order.
	Tools []ToolSpec
	// Settings are the merged model settings for this call.
	Settings Settings
	// Output, when set, asks for structured output matching its schema.
	Output *OutputSpec
	// InstanceID and Node name the leaf this request is for (metadata for
	// scripted models, tracing and logging; providers ignore them).
	InstanceID string
	Node       string
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's input object.
	InputSchema json.RawMessage
}

// OutputSpec asks the model for structured output.
type OutputSpec struct {
	// Name identifies the schema to providers that want one.
	Name string
	// Schema is the JSON Schema the output must match.
	Schema json.RawMessage
}

// Settings are per-call model settings. A zero field means "not set": the
// charter's defaults apply, then the provider's.
type Settings struct {
	Model       string
	MaxTokens   int
	Temperature *float64
}

// Merge returns s with every field that over sets replaced by over's value.
func (s Settings) Merge(over Settings) Settings {
	if over.Model != "" {
		s.Model = over.Model
	}
	if over.MaxTokens != 0 {
		s.MaxTokens = over.MaxTokens
	}
	if over.Temperature != nil {
		s.Temperature = over.Temperature
	}
	return s
}

// Temperature returns a pointer to t, for Settings literals.
func Temperature(t float64) *float64 { return &t }

// StopReason says why the model stopped.
type StopReason string

// The stop reasons markov acts on. Providers map their own reasons onto
// these; anything unknown becomes EndTurn.
const (
	EndTurn   StopReason = "end_turn"
	ToolUse   StopReason = "tool_use"
	MaxTokens StopReason = "max_tokens"
	// Refusal: the model declined to answer; the turn ends.
	Refusal StopReason = "refusal"
	// PauseTurn: the provider paused a long turn; calling again continues it.
	PauseTurn StopReason = "pause_turn"
)

// Usage counts tokens of one call.
type Usage struct {
	InputTokens      int
	OutputTokens     int
	CacheReadTokens  int
	CacheWriteTokens int
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
}

// Response is the model's reply.
type Response struct {
	// Message is the assistant message (Role Assistant).
	Message    message.Message
	StopReason StopReason
	Usage      Usage
	// ID is the provider's ID of the reply and Model the model that
	// wrote it, as the provider reports them (empty when it does not).
	// They feed telemetry (gen_ai.response.id, gen_ai.response.model)
	// and are not persisted.
	ID    string
	Model string
}

// ProviderNamer is implemented by models that name the provider they
// call, for telemetry: OpenTelemetry's gen_ai.provider.name ("anthropic",
// "openai"). Spans and metrics of a model without it say "unknown".
type ProviderNamer interface {
	ProviderName() string
}

// ToolInput returns a tool use's input as valid JSON, whatever a provider
// sent: blank input is the empty object, valid JSON is kept (without
// surrounding space), and anything else becomes a JSON string of it, so the
// transcript stays encodable and decoding the input into the tool's input
// type fails visibly.
func ToolInput(raw []byte) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return json.RawMessage(`{}`)
	}
	if json.Valid(t) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(string(raw))
	return b
}
