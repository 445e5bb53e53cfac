// Package telemetry holds markov's OpenTelemetry vocabulary: the GenAI
// semantic conventions' span names and attributes for model calls and
// tool executions, the metric instruments, and the W3C traceparent form
// in which a suspension remembers the span that created it.
//
// Everything here is cheap to skip: callers ask Enabled-style questions
// before building attributes, so a process with no tracer or meter
// provider configured pays no allocation for it.
package telemetry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/llm"
)

// ScopeName is the instrumentation scope of markov's spans and metrics.
const ScopeName = "github.com/markov-agents/markov"

// GenAI operation names (gen_ai.operation.name).
const (
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

// UnknownProvider is gen_ai.provider.name for a model that does not name
// its provider (llm.ProviderNamer).
const UnknownProvider = "unknown"

// systemKey is gen_ai.system, which the conventions replaced with
// gen_ai.provider.name; markov sets both for older backends.
const systemKey = attribute.Key("gen_ai.system")

// ProviderOf returns the provider name of model for gen_ai.provider.name.
func ProviderOf(model llm.Model) string {
	if p, ok := model.(llm.ProviderNamer); ok {
		if name := p.ProviderName(); name != "" {
			return name
		}
	}
	return UnknownProvider
}

// ChatSpanName is the name of the span of a model call to model
// ("chat claude-sonnet-4-5"; "chat" when the request names no model).
func ChatSpanName(model string) string {
	if model == "" {
		return OpChat
	}
	return OpChat + " " + model
}

// ToolSpanName is the name of the span of a call of the tool name.
func ToolSpanName(name string) string { return OpExecuteTool + " " + name }

// SetRequest sets the GenAI request attributes of a model call's span.
func SetRequest(span trace.Span, provider string, req *llm.Request) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.GenAIOperationNameKey.String(OpChat),
		semconv.GenAIProviderNameKey.String(provider), systemKey.String(provider))
	s := req.Settings
	if s.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModelKey.String(s.Model))
	}
	if s.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokensKey.Int(s.MaxTokens))
	}
	if s.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperatureKey.Float64(*s.Temperature))
	}
	span.SetAttributes(attrs...)
}

// SetResponse sets the GenAI response attributes of a model call's span.
// gen_ai.usage.input_tokens counts every input token, cached ones too, as
// the conventions ask; the cache reads and writes are also given apart.
func SetResponse(span trace.Span, resp *llm.Response) {
	u := resp.Usage
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		semconv.GenAIResponseFinishReasonsKey.StringSlice([]string{string(resp.StopReason)}),
		semconv.GenAIUsageInputTokensKey.Int(InputTokens(u)),
		semconv.GenAIUsageOutputTokensKey.Int(u.OutputTokens))
	if resp.ID != "" {
		attrs = append(attrs, semconv.GenAIResponseIDKey.String(resp.ID))
	}
	if resp.Model != "" {
		attrs = append(attrs, semconv.GenAIResponseModelKey.String(resp.Model))
	}
	if u.CacheReadTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokensKey.Int(u.CacheReadTokens))
	}
	if u.CacheWriteTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokensKey.Int(u.CacheWriteTokens))
	}
	span.SetAttributes(attrs...)
}

// InputTokens is every input token of u: fresh, read from the cache and
// written to it.
func InputTokens(u llm.Usage) int { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }

// ToolAttributes are the GenAI attributes of the span of a call of the
// tool name with tool-use ID callID.
func ToolAttributes(name, description, callID string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(OpExecuteTool),
		semconv.GenAIToolNameKey.String(name),
		semconv.GenAIToolTypeKey.String("function"),
	}
	if callID != "" {
		attrs = append(attrs, semconv.GenAIToolCallIDKey.String(callID))
	}
	if description != "" {
		attrs = append(attrs, semconv.GenAIToolDescriptionKey.String(description))
	}
	return attrs
}

// ErrorType is error.type for err: "timeout" and "canceled" for the
// context's errors, "_OTHER" for anything else.
func ErrorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// ErrorAttribute is the error.type attribute of err.
func ErrorAttribute(err error) attribute.KeyValue { return semconv.ErrorTypeKey.String(ErrorType(err)) }
