package anthropic_test

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/llm/llmtest"
	"github.com/markov-agents/markov/message"
)

func TestConformance(t *testing.T) {
	messagesAPI.RunConformance(t, fakeapi.Conformance{
		Path:         "/v1/messages",
		Header:       map[string]string{"X-Api-Key": fakeapi.APIKey, "Anthropic-Version": "2023-06-01"},
		Caps:         llmtest.Capabilities{Thinking: true, Structured: true},
		Encode:       encodeReply,
		EncodeStream: encodeStream,
		APIError:     llmtest.StatusOf(func(e *sdk.Error) int { return e.StatusCode }),
	})
}

// encodeReply writes r as the Messages API does. markov's stop reasons
// are named after Anthropic's, so they go on the wire unchanged.
func encodeReply(t *testing.T, r llmtest.Reply) fakeapi.Reply {
	t.Helper()
	if r.Status != 0 {
		return fakeapi.Reply{Status: r.Status, Body: `{"type":"error","error":{"type":"api_error","message":"fake provider error"}}`}
	}
	blocks := make([]map[string]any, 0, len(r.Response.Message.Parts))
	for _, p := range r.Response.Message.Parts {
		switch p.Kind {
		case message.KindText, message.KindStructured:
			blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
		case message.KindToolUse:
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": p.ID, "name": p.Name, "input": p.Data})
		case message.KindThinking:
			blocks = append(blocks, map[string]any{"type": "thinking", "thinking": p.Text, "signature": p.Signature})
		default:
			t.Fatalf("a reply cannot hold a %v part", p.Kind)
		}
	}
	u := r.Response.Usage
	body, err := json.Marshal(map[string]any{
		"id": "msg_conformance", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content":       blocks,
		"stop_reason":   r.Response.StopReason,
		"stop_sequence": nil,
		"usage": map[string]int{
			"input_tokens":                u.InputTokens,
			"output_tokens":               u.OutputTokens,
			"cache_read_input_tokens":     u.CacheReadTokens,
			"cache_creation_input_tokens": u.CacheWriteTokens,
		},
	})
	require.NoError(t, err)
	return fakeapi.Reply{Body: string(body)}
}

// encodeStream writes r as the Messages API streams it: message_start with
// the input usage, each block's start, deltas (in two pieces) and stop,
// message_delta with the stop reason and output tokens, message_stop. A
// fault cuts the stream after the first delta, with an error event for
// FaultError.
func encodeStream(t *testing.T, r llmtest.Reply) string {
	t.Helper()
	var b strings.Builder
	u := r.Response.Usage
	fakeapi.Event(t, &b, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_conformance", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{
			"input_tokens":                u.InputTokens,
			"cache_read_input_tokens":     u.CacheReadTokens,
			"cache_creation_input_tokens": u.CacheWriteTokens,
			"output_tokens":               1,
		},
	}})
	for i, p := range r.Response.Message.Parts {
		start, deltas := streamBlock(t, p)
		fakeapi.Event(t, &b, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			fakeapi.Event(t, &b, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
			switch r.Fault {
			case llmtest.FaultError:
				fakeapi.Event(t, &b, "error", map[string]any{"type": "error", "error": map[string]string{"type": "overloaded_error", "message": "Overloaded"}})
				return b.String()
			case llmtest.FaultEOF:
				return b.String()
			}
		}
		fakeapi.Event(t, &b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	fakeapi.Event(t, &b, "message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": r.Response.StopReason, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": u.OutputTokens},
	})
	fakeapi.Event(t, &b, "message_stop", map[string]string{"type": "message_stop"})
	return b.String()
}

// streamBlock returns the content_block_start block of p and its deltas.
func streamBlock(t *testing.T, p message.Part) (map[string]any, []map[string]string) {
	t.Helper()
	var deltas []map[string]string
	switch p.Kind {
	case message.KindText, message.KindStructured:
		for _, piece := range fakeapi.Pieces(p.Text) {
			deltas = append(deltas, map[string]string{"type": "text_delta", "text": piece})
		}
		return map[string]any{"type": "text", "text": ""}, deltas
	case message.KindThinking:
		for _, piece := range fakeapi.Pieces(p.Text) {
			deltas = append(deltas, map[string]string{"type": "thinking_delta", "thinking": piece})
		}
		deltas = append(deltas, map[string]string{"type": "signature_delta", "signature": p.Signature})
		return map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas
	case message.KindToolUse:
		deltas = append(deltas, map[string]string{"type": "input_json_delta", "partial_json": ""})
		for _, piece := range fakeapi.Pieces(string(p.Data)) {
			deltas = append(deltas, map[string]string{"type": "input_json_delta", "partial_json": piece})
		}
		return map[string]any{"type": "tool_use", "id": p.ID, "name": p.Name, "input": map[string]any{}}, deltas
	}
	t.Fatalf("a reply cannot hold a %v part", p.Kind)
	return nil, nil
}
