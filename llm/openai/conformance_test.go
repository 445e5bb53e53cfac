package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/llm/llmtest"
	"github.com/markov-agents/markov/message"
)

func TestConformance(t *testing.T) {
	chatAPI.RunConformance(t, fakeapi.Conformance{
		Path:   "/chat/completions",
		Header: map[string]string{"Authorization": "Bearer " + fakeapi.APIKey},
		// Chat Completions cannot replay thinking.
		Caps:         llmtest.Capabilities{Structured: true},
		Encode:       encodeReply,
		EncodeStream: encodeStream,
		APIError:     llmtest.StatusOf(func(e *sdk.Error) int { return e.StatusCode }),
	})
}

// finishReasons are the wire names of markov's stop reasons.
var finishReasons = map[llm.StopReason]string{
	llm.EndTurn:   "stop",
	llm.ToolUse:   "tool_calls",
	llm.MaxTokens: "length",
	llm.Refusal:   "content_filter",
}

// encodeReply writes r as the Chat Completions API does: the text as
// content (null when there is none), tool uses as function tool calls,
// and the cached prompt tokens as part of prompt_tokens.
func encodeReply(t *testing.T, r llmtest.Reply) fakeapi.Reply {
	t.Helper()
	if r.Status != 0 {
		return fakeapi.Reply{Status: r.Status, Body: `{"error":{"message":"fake provider error","type":"server_error","param":null,"code":null}}`}
	}
	var content *string
	var calls []map[string]any
	for _, p := range r.Response.Message.Parts {
		switch p.Kind {
		case message.KindText, message.KindStructured:
			text := p.Text
			if content != nil {
				text = *content + text
			}
			content = &text
		case message.KindToolUse:
			calls = append(calls, map[string]any{
				"id": p.ID, "type": "function",
				"function": map[string]string{"name": p.Name, "arguments": string(p.Data)},
			})
		default:
			t.Fatalf("a reply cannot hold a %v part", p.Kind)
		}
	}
	finish, ok := finishReasons[r.Response.StopReason]
	require.True(t, ok, "no finish reason for %s", r.Response.StopReason)
	msg := map[string]any{"role": "assistant", "content": content, "refusal": nil}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	body, err := json.Marshal(map[string]any{
		"id": "chatcmpl-conformance", "object": "chat.completion", "created": 1741569952, "model": "gpt-4.1",
		"choices": []map[string]any{{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":   usage(r.Response.Usage),
	})
	require.NoError(t, err)
	return fakeapi.Reply{Body: string(body)}
}

// usage is u on the wire: the cached prompt tokens are part of
// prompt_tokens.
func usage(u llm.Usage) map[string]any {
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return map[string]any{
		"prompt_tokens":     prompt,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      prompt + u.OutputTokens,
		"prompt_tokens_details": map[string]int{
			"cached_tokens":      u.CacheReadTokens,
			"cache_write_tokens": u.CacheWriteTokens,
		},
	}
}

// encodeStream writes r as Chat Completions streams it with usage asked
// for: a chunk with the role, the text in two content deltas, each tool
// call's start and two arguments deltas, a chunk with the finish reason,
// one with the usage, and [DONE]. A fault cuts the stream after the first
// delta, with an error chunk for FaultError.
func encodeStream(t *testing.T, r llmtest.Reply) string {
	t.Helper()
	var b strings.Builder
	chunk := func(delta map[string]any, finish any, usage any) {
		choices := []map[string]any{}
		if delta != nil {
			choices = append(choices, map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish})
		}
		fakeapi.Event(t, &b, "", map[string]any{
			"id": "chatcmpl-conformance", "object": "chat.completion.chunk", "created": 1741569952, "model": "gpt-4.1",
			"choices": choices, "usage": usage,
		})
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil, nil)
	var deltas []map[string]any
	calls := 0
	for _, p := range r.Response.Message.Parts {
		switch p.Kind {
		case message.KindText, message.KindStructured:
			for _, piece := range fakeapi.Pieces(p.Text) {
				deltas = append(deltas, map[string]any{"content": piece})
			}
		case message.KindToolUse:
			call := func(fields map[string]any) map[string]any {
				fields["index"] = calls
				return map[string]any{"tool_calls": []map[string]any{fields}}
			}
			deltas = append(deltas, call(map[string]any{"id": p.ID, "type": "function", "function": map[string]string{"name": p.Name, "arguments": ""}}))
			for _, piece := range fakeapi.Pieces(string(p.Data)) {
				deltas = append(deltas, call(map[string]any{"function": map[string]string{"arguments": piece}}))
			}
			calls++
		default:
			t.Fatalf("a reply cannot hold a %v part", p.Kind)
		}
	}
	for _, d := range deltas {
		chunk(d, nil, nil)
		switch r.Fault {
		case llmtest.FaultError:
			fakeapi.Event(t, &b, "", map[string]any{"error": map[string]any{"message": "The server had an error while processing your request.", "type": "server_error", "param": nil, "code": nil}})
			return b.String()
		case llmtest.FaultEOF:
			return b.String()
		}
	}
	finish, ok := finishReasons[r.Response.StopReason]
	require.True(t, ok, "no finish reason for %s", r.Response.StopReason)
	chunk(map[string]any{}, finish, nil)
	chunk(nil, nil, usage(r.Response.Usage))
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}
