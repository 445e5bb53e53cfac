package anthropic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/markov-agents/markov/examples/approval/refund/refundtest"
	"github.com/markov-agents/markov/llm/internal/fakeapi"
)

// The approval flow end to end on this adapter, against a fake Messages
// API: the model calls request_refund, the call suspends, the machine is
// serialized and restored with a fresh charter (a new process), the
// manager's decision resumes it, and the second request carries the tool
// result paired with the tool use.

const (
	approvalToolUseID = "toolu_01RefundA1042xyz"
	approvalHeldText  = "I'm sorry about the blender. I'll ask a manager to approve the refund."
	approvalFinalText = "All done: your refund for order A-1042 has been handled."
)

// approvalToolUseReply is the first reply: text and a request_refund call.
var approvalToolUseReply = fmt.Sprintf(`{
  "id": "msg_approval_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": %q},
    {"type": "tool_use", "id": %q, "name": "request_refund",
     "input": {"order_id": "A-1042", "amount": 89.9, "reason": "arrived broken"}}
  ],
  "stop_reason": "tool_use", "stop_sequence": null,
  "usage": {"input_tokens": 410, "output_tokens": 71}
}`, approvalHeldText, approvalToolUseID)

// approvalFinalReply is the second reply, after the tool result.
var approvalFinalReply = fmt.Sprintf(`{
  "id": "msg_approval_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
  "content": [{"type": "text", "text": %q}],
  "stop_reason": "end_turn", "stop_sequence": null,
  "usage": {"input_tokens": 520, "output_tokens": 17}
}`, approvalFinalText)

// approvalBlock is a content block of a Messages API request.
type approvalBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// approvalRequest is the part of a Messages API request the fake checks.
type approvalRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// approvalBlocks decodes a message content: a string or an array of blocks.
func approvalBlocks(raw json.RawMessage) ([]approvalBlock, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []approvalBlock{{Type: "text", Text: s}}, nil
	}
	var bs []approvalBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("content %s: %w", raw, err)
	}
	return bs, nil
}

// approvalFlow is the approval flow on a fake Messages API; the second
// request must carry the tool result paired with the tool use.
var approvalFlow = fakeapi.Flow[approvalRequest]{
	API: messagesAPI.API, Model: messagesAPI.Model, Path: "/v1/messages",
	Rejection: `{"type":"error","error":{"type":"invalid_request_error","message":"rejected by the fake"}}`,
	Tool:      "request_refund", ToolReply: approvalToolUseReply, FinalReply: approvalFinalReply,
	Tools: func(req approvalRequest) []string {
		var names []string
		for _, tool := range req.Tools {
			names = append(names, tool.Name)
		}
		return names
	},
	First: func(req approvalRequest) error {
		if len(req.Messages) != 1 || req.Messages[0].Role != "user" {
			return errors.New("want the customer's message alone")
		}
		return nil
	},
	Second: checkApprovalPairing,
}

// checkApprovalPairing checks the request after the resume: the customer's
// message, the assistant message with its tool use, and a user message
// holding exactly the tool_result for that tool use, with the text want.
func checkApprovalPairing(req approvalRequest, want string) error {
	if len(req.Messages) != 3 {
		return fmt.Errorf("want 3 messages, got %d", len(req.Messages))
	}
	asst, res := req.Messages[1], req.Messages[2]
	if asst.Role != "assistant" || res.Role != "user" {
		return fmt.Errorf("roles %s, %s", asst.Role, res.Role)
	}
	use, err := approvalUse(asst.Content)
	if err != nil {
		return err
	}
	text, err := approvalResult(res.Content, use.ID)
	if err != nil {
		return err
	}
	if text != want {
		return fmt.Errorf("tool result %q, want %q", text, want)
	}
	return nil
}

// approvalUse returns the one tool use of the assistant message content,
// which must be the request_refund call of the first reply.
func approvalUse(content json.RawMessage) (approvalBlock, error) {
	blocks, err := approvalBlocks(content)
	if err != nil {
		return approvalBlock{}, err
	}
	var uses []approvalBlock
	for _, b := range blocks {
		if b.Type == "tool_use" {
			uses = append(uses, b)
		}
	}
	if len(uses) != 1 || uses[0].ID != approvalToolUseID || uses[0].Name != "request_refund" {
		return approvalBlock{}, fmt.Errorf("the assistant message lost its tool use: %s", content)
	}
	return uses[0], nil
}

// approvalResult returns the text of the one tool_result, for the tool use
// id, that the user message content must hold.
func approvalResult(content json.RawMessage, id string) (string, error) {
	blocks, err := approvalBlocks(content)
	if err != nil {
		return "", err
	}
	if len(blocks) != 1 || blocks[0].Type != "tool_result" || blocks[0].ToolUseID != id || blocks[0].IsError {
		return "", fmt.Errorf("want one tool_result for %s, got %s", id, content)
	}
	parts, err := approvalBlocks(blocks[0].Content)
	if err != nil {
		return "", err
	}
	var text string
	for _, b := range parts {
		text += b.Text
	}
	return text, nil
}

func TestApprovalFlow(t *testing.T) {
	refundtest.RunCases(t, refundtest.Expect{
		ToolUseID: approvalToolUseID, HeldText: approvalHeldText, FinalText: approvalFinalText,
	}, approvalFlow.Models)
}
