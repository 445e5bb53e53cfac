package acp

import (
	"context"
	"encoding/json"
	"slices"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/message"
)

// replay re-emits the session's history as session/update (session/load),
// then its pending calls: a pending tool call per tool suspension, a
// suspended update per park.
func (c *conn) replay(ctx context.Context, s *session) error {
	m, _, err := c.a.cfg.Runner.Load(ctx, s.id)
	if err != nil {
		return err
	}
	if err := c.replayMessages(ctx, s.id, m.History()); err != nil {
		return err
	}
	for _, call := range m.Pending() {
		if err := c.announce(ctx, s, call, false); err != nil {
			return err
		}
	}
	return nil
}

// follow shows what the run of park handle, resolved elsewhere, added to
// the history since the shown messages from the resolving one on, until
// the run has settled: its last message a reply with no tool call, or a
// call pending again (which it then shows). A history without the
// resolving message has nothing to show.
func (c *conn) follow(ctx context.Context, s *session, handle string, shown int) error {
	m, _, err := c.a.cfg.Runner.Load(ctx, s.id)
	if err != nil {
		return err
	}
	h := m.History()
	i := slices.IndexFunc(h, func(msg message.Message) bool {
		return slices.ContainsFunc(msg.Parts, func(p message.Part) bool { return p.SuspendID == handle })
	})
	if i < 0 {
		s.setFollow(handle, -1)
		return nil
	}
	added := h[min(i+shown, len(h)):]
	if err := c.replayMessages(ctx, s.id, added); err != nil {
		return err
	}
	pending := m.Pending()
	last := h[len(h)-1]
	if len(pending) == 0 && (last.Role != message.Assistant || len(last.ToolUses()) > 0) {
		s.setFollow(handle, shown+len(added)) // the run goes on
		return nil
	}
	s.setFollow(handle, -1)
	for _, call := range pending {
		if err := c.announce(ctx, s, call, true); err != nil {
			return err
		}
	}
	return nil
}

// replayMessages emits the updates of history messages.
func (c *conn) replayMessages(ctx context.Context, id string, history []message.Message) error {
	for _, msg := range history {
		for _, u := range messageUpdates(msg) {
			if err := c.update(ctx, id, u); err != nil {
				return err
			}
		}
	}
	return nil
}

// messageUpdates are the session updates that show msg.
func messageUpdates(msg message.Message) []acpsdk.SessionUpdate {
	var out []acpsdk.SessionUpdate
	for _, p := range msg.Parts {
		switch {
		case msg.Role == message.User && p.Kind == message.KindText:
			out = append(out, acpsdk.UpdateUserMessageText(p.Text))
		case msg.Role == message.Assistant && p.Kind == message.KindText:
			out = append(out, acpsdk.UpdateAgentMessageText(p.Text))
		case msg.Role == message.Assistant && p.Kind == message.KindThinking && p.Text != "":
			out = append(out, acpsdk.UpdateAgentThoughtText(p.Text))
		case p.Kind == message.KindToolUse:
			out = append(out, acpsdk.StartToolCall(acpsdk.ToolCallId(p.ID), p.Name,
				acpsdk.WithStartKind(acpsdk.ToolKindOther),
				acpsdk.WithStartStatus(acpsdk.ToolCallStatusInProgress),
				acpsdk.WithStartRawInput(rawJSON(p.Data))))
		case p.Kind == message.KindToolResult:
			out = append(out, finished(p.ID, p.Text, p.IsError))
		}
	}
	return out
}

// finished is the update of a tool call that returned text.
func finished(toolUseID, text string, isError bool) acpsdk.SessionUpdate {
	status := acpsdk.ToolCallStatusCompleted
	if isError {
		status = acpsdk.ToolCallStatusFailed
	}
	return acpsdk.UpdateToolCall(acpsdk.ToolCallId(toolUseID),
		acpsdk.WithUpdateStatus(status),
		acpsdk.WithUpdateContent([]acpsdk.ToolCallContent{acpsdk.ToolContent(acpsdk.TextBlock(text))}),
		acpsdk.WithUpdateRawOutput(text))
}

// pendingCall is the update of a tool call suspended for an answer: it
// stays pending, showing the reason and the handle that resumes it.
func pendingCall(call instance.SuspendedCall) acpsdk.SessionUpdate {
	u := acpsdk.UpdateToolCall(acpsdk.ToolCallId(call.ToolUseID),
		acpsdk.WithUpdateStatus(acpsdk.ToolCallStatusPending),
		acpsdk.WithUpdateContent([]acpsdk.ToolCallContent{acpsdk.ToolContent(acpsdk.TextBlock("waiting: " + call.Reason))}))
	meta := map[string]any{"handle": call.SuspendID, "reason": call.Reason}
	if len(call.PayloadSchema) > 0 {
		meta["payloadSchema"] = rawJSON(call.PayloadSchema)
	}
	u.ToolCallUpdate.Meta = meta
	return u
}

// rawJSON is data as a JSON value for a raw field (null if empty).
func rawJSON(data []byte) any {
	if len(data) == 0 {
		return nil
	}
	return json.RawMessage(data)
}

// update sends one session/update.
func (c *conn) update(ctx context.Context, id string, u acpsdk.SessionUpdate) error {
	return c.sdk.SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: acpsdk.SessionId(id), Update: u})
}
