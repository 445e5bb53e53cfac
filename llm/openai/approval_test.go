package openai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
)

// The approval flow end to end on this adapter, against a fake Chat
// Completions API: the model calls request_refund, the call suspends, the
// machine is serialized and restored with a fresh charter (a new process),
// the manager's decision resumes it, and the second request carries the
// tool message paired with the tool call.

const (
	approvalCallID    = "call_RefundA1042xyz"
	approvalHeldText  = "I'm sorry about the blender. I'll ask a manager to approve the refund."
	approvalFinalText = "All done: your refund for order A-1042 has been handled."
)

// approvalToolCallsReply is the first reply: text and a request_refund
// call.
var approvalToolCallsReply = fmt.Sprintf(`{
  "id": "chatcmpl-approval-1", "object": "chat.completion", "created": 1741570283, "model": "gpt-4.1-mini-2025-04-14",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant", "content": %q, "refusal": null, "annotations": [],
      "tool_calls": [{"id": %q, "type": "function",
        "function": {"name": "request_refund", "arguments": %q}}]
    },
    "logprobs": null, "finish_reason": "tool_calls"
  }],
  "usage": {"prompt_tokens": 410, "completion_tokens": 71, "total_tokens": 481}
}`, approvalHeldText, approvalCallID, `{"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}`)

// approvalFinalReply is the second reply, after the tool result.
var approvalFinalReply = fmt.Sprintf(`{
  "id": "chatcmpl-approval-2", "object": "chat.completion", "created": 1741570300, "model": "gpt-4.1-mini-2025-04-14",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": %q, "refusal": null, "annotations": []},
    "logprobs": null, "finish_reason": "stop"
  }],
  "usage": {"prompt_tokens": 520, "completion_tokens": 17, "total_tokens": 537}
}`, approvalFinalText)

// approvalMessage is a Chat Completions request message.
type approvalMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// approvalRequest is the part of a Chat Completions request the fake checks.
type approvalRequest struct {
	Model    string            `json:"model"`
	Messages []approvalMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// approvalText decodes a message content: a string or an array of text parts.
func approvalText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content %s: %w", raw, err)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// approvalConversation returns the request's messages without the system ones.
func approvalConversation(req approvalRequest) []approvalMessage {
	var out []approvalMessage
	for _, m := range req.Messages {
		if m.Role != "system" && m.Role != "developer" {
			out = append(out, m)
		}
	}
	return out
}

// checkApprovalPairing checks the request after the resume: the customer's
// message, the assistant message with its tool call, and exactly one tool
// message answering that call with the text want.
func checkApprovalPairing(req approvalRequest, want string) error {
	msgs := approvalConversation(req)
	if len(msgs) != 3 {
		return fmt.Errorf("want 3 messages besides the system prompt, got %d", len(msgs))
	}
	asst, res := msgs[1], msgs[2]
	if asst.Role != "assistant" || res.Role != "tool" {
		return fmt.Errorf("roles %s, %s", asst.Role, res.Role)
	}
	if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].ID != approvalCallID || asst.ToolCalls[0].Function.Name != "request_refund" {
		return fmt.Errorf("the assistant message lost its tool call: %+v", asst.ToolCalls)
	}
	if res.ToolCallID != asst.ToolCalls[0].ID {
		return fmt.Errorf("tool message answers %q, want %q", res.ToolCallID, asst.ToolCalls[0].ID)
	}
	got, err := approvalText(res.Content)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("tool result %q, want %q", got, want)
	}
	return nil
}

// approvalFlow is the approval flow on a fake Chat Completions API; the
// second request must carry the tool result paired with the tool call.
var approvalFlow = fakeapi.Flow[approvalRequest]{
	API: chatAPI.API, Model: chatAPI.Model, Path: "/chat/completions",
	Rejection: `{"error":{"message":"rejected by the fake","type":"invalid_request_error","param":null,"code":null}}`,
	Tool:      "request_refund", ToolReply: approvalToolCallsReply, FinalReply: approvalFinalReply,
	Tools: func(req approvalRequest) []string {
		var names []string
		for _, tool := range req.Tools {
			names = append(names, tool.Function.Name)
		}
		return names
	},
	First: func(req approvalRequest) error {
		if msgs := approvalConversation(req); len(msgs) != 1 || msgs[0].Role != "user" {
			return errors.New("want the customer's message alone")
		}
		return nil
	},
	Second: checkApprovalPairing,
}

func TestApprovalFlow(t *testing.T) {
	refundtest.RunCases(t, refundtest.Expect{
		ToolUseID: approvalCallID, HeldText: approvalHeldText, FinalText: approvalFinalText,
	}, approvalFlow.Models)
}
