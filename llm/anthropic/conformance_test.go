package anthropic_test

import (
	"encoding/json"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/anthropic"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
	"github.com/markov-agents/markov/llm/llmtest"
	"github.com/markov-agents/markov/message"
)

func TestConformance(t *testing.T) {
	llmtest.Run(t, messagesAPI.Harness(fakeapi.Conformance{
		Name:   "anthropic",
		Path:   "/v1/messages",
		Header: map[string]string{"X-Api-Key": "test-key", "Anthropic-Version": "2023-06-01"},
		Caps:   llmtest.Capabilities{Thinking: true, Structured: true},
		Encode: encodeReply,
		NewModel: func(t *testing.T, srv *fakeapi.Server, retries int) llm.Model {
			return newModel(t, srv, func(c *anthropic.Config) { c.MaxRetries = new(retries) })
		},
		APIError: llmtest.StatusOf(func(e *sdk.Error) int { return e.StatusCode }),
	}))
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
