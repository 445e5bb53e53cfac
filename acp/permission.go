package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/schematype"
	"github.com/markov-agents/markov/machine"
)

// Permission option IDs of a session/request_permission the agent sends.
const (
	OptionAllow = "allow"
	OptionDeny  = "deny"
)

// payloadSchema is the part of a JSON Schema YesNo reads.
type payloadSchema struct {
	Type       json.RawMessage           `json:"type"`
	Properties map[string]*payloadSchema `json:"properties"`
	Required   []string                  `json:"required"`
}

// typeName is the schema's one type other than null, or "".
func (s *payloadSchema) typeName() string { return schematype.Of(s.Type) }

// YesNo reports whether a suspension's resume payload schema is answered
// by a yes or a no — the way the console finds its approve / reject
// buttons: the schema is a boolean, or an object with exactly one boolean
// property whose other required properties are strings. field is that
// property ("" for a bare boolean). Such a tool suspension becomes a
// session/request_permission; the answer sets the boolean and fills the
// other required strings with the client's name (the decider).
func YesNo(schema json.RawMessage) (field string, ok bool) {
	var s payloadSchema
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return "", false
	}
	switch s.typeName() {
	case "boolean":
		return "", true
	case "object":
	default:
		return "", false
	}
	for name, p := range s.Properties {
		if p == nil {
			return "", false
		}
		switch t := p.typeName(); {
		case t == "boolean" && field == "":
			field = name
		case t == "boolean":
			return "", false // two booleans: not one decision
		case t != "string" && slices.Contains(s.Required, name):
			return "", false
		}
	}
	return field, field != ""
}

// yesNoPayload is the payload that answers a yes-no schema.
func yesNoPayload(schema json.RawMessage, field string, yes bool, decider string) any {
	if field == "" {
		return yes
	}
	var s payloadSchema
	_ = json.Unmarshal(schema, &s) // YesNo parsed it already
	out := map[string]any{field: yes}
	for _, name := range s.Required {
		if name != field {
			out[name] = decider
		}
	}
	return out
}

// permission asks the client about the yes-no call and returns the
// resume input of its answer; a cancelled request returns ctx's error.
func (c *conn) permission(ctx context.Context, s *session, call instance.SuspendedCall) (machine.ResumeInput, error) {
	field, _ := YesNo(call.PayloadSchema)
	title := call.Name
	status := acpsdk.ToolCallStatusPending
	resp, err := c.sdk.RequestPermission(ctx, acpsdk.RequestPermissionRequest{
		SessionId: acpsdk.SessionId(s.id),
		ToolCall: acpsdk.ToolCallUpdate{
			ToolCallId: acpsdk.ToolCallId(call.ToolUseID),
			Title:      &title,
			Status:     &status,
			RawInput:   rawJSON(call.Input),
			Content:    []acpsdk.ToolCallContent{acpsdk.ToolContent(acpsdk.TextBlock(call.Reason))},
			Meta:       map[string]any{"handle": call.SuspendID, "reason": call.Reason},
		},
		Options: []acpsdk.PermissionOption{
			{OptionId: OptionAllow, Name: "Allow", Kind: acpsdk.PermissionOptionKindAllowOnce},
			{OptionId: OptionDeny, Name: "Deny", Kind: acpsdk.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil {
		return machine.ResumeInput{}, err
	}
	if resp.Outcome.Selected == nil {
		return machine.ResumeInput{}, fmt.Errorf("permission for %s: %w", call.SuspendID, context.Canceled)
	}
	yes := resp.Outcome.Selected.OptionId == OptionAllow
	c.mu.Lock()
	decider := c.client
	c.mu.Unlock()
	return machine.ResumeInput{
		SuspendID: call.SuspendID,
		Payload:   yesNoPayload(call.PayloadSchema, field, yes, decider),
		By:        "acp:" + decider,
	}, nil
}

// asksPermission reports whether call is a tool suspension the client
// answers with session/request_permission.
func asksPermission(call instance.SuspendedCall) bool {
	if call.Kind != instance.KindTool {
		return false
	}
	_, ok := YesNo(call.PayloadSchema)
	return ok
}
