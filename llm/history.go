package llm

import (
	"fmt"

	"github.com/markov-agents/markov/message"
)

// CheckPairing reports whether msgs is a transcript a provider can send.
//
// Every tool use (a [message.KindToolUse] part of an Assistant message) must
// have a non-empty ID unique within its message and be answered by a
// [message.KindToolResult] part with the same ID in the message right after
// it, which must have Role [message.Tool]. A Tool message must follow an
// Assistant message with tool uses and answer each of them exactly once;
// tool results anywhere else, results for unknown IDs, Record messages and
// unknown roles are rejected.
//
// The error wraps [ErrMalformedHistory] and names the index of the offending
// message and the tool-use ID. Provider adapters call CheckPairing before
// sending a request, so a malformed transcript never reaches the network.
func CheckPairing(msgs []message.Message) error {
	for i := range msgs {
		m := &msgs[i]
		if err := checkPlacement(i, m); err != nil {
			return err
		}
		switch m.Role {
		case message.Assistant:
			if err := checkUses(msgs, i); err != nil {
				return err
			}
		case message.Tool:
			if err := checkResults(msgs, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPlacement checks the role of message i, m, and that it holds tool
// results only if it is a Tool message and tool uses only if it is an
// Assistant message.
func checkPlacement(i int, m *message.Message) error {
	switch m.Role {
	case message.User, message.Assistant, message.Tool:
	case message.Record:
		return fmt.Errorf("%w: message %d: record messages are never sent to a model", ErrMalformedHistory, i)
	default:
		return fmt.Errorf("%w: message %d: unknown role %q", ErrMalformedHistory, i, m.Role)
	}
	if m.Role != message.Tool {
		if p, ok := firstOfKind(m.Parts, message.KindToolResult); ok {
			return fmt.Errorf("%w: message %d: tool result %q in a %s message", ErrMalformedHistory, i, p.ID, m.Role)
		}
	}
	if m.Role != message.Assistant {
		if p, ok := firstOfKind(m.Parts, message.KindToolUse); ok {
			return fmt.Errorf("%w: message %d: tool use %q in a %s message", ErrMalformedHistory, i, p.ID, m.Role)
		}
	}
	return nil
}

// firstOfKind returns the first part of kind k.
func firstOfKind(parts []message.Part, k message.Kind) (message.Part, bool) {
	for _, p := range parts {
		if p.Kind == k {
			return p, true
		}
	}
	return message.Part{}, false
}

// checkResults checks the tool results of the Tool message msgs[i]: it
// follows an assistant message with tool uses and answers each at most
// once. (Missing results were caught when the assistant message was
// checked.)
func checkResults(msgs []message.Message, i int) error {
	if i == 0 || msgs[i-1].Role != message.Assistant || len(msgs[i-1].ToolUses()) == 0 {
		first, _ := firstOfKind(msgs[i].Parts, message.KindToolResult)
		return fmt.Errorf("%w: message %d: tool result %q does not follow an assistant message with tool uses", ErrMalformedHistory, i, first.ID)
	}
	uses := make(map[string]bool)
	for _, p := range msgs[i-1].Parts {
		if p.Kind == message.KindToolUse {
			uses[p.ID] = false
		}
	}
	for _, p := range msgs[i].Parts {
		if p.Kind != message.KindToolResult {
			continue
		}
		answered, ok := uses[p.ID]
		if !ok {
			return fmt.Errorf("%w: message %d: tool result %q answers no tool use of message %d", ErrMalformedHistory, i, p.ID, i-1)
		}
		if answered {
			return fmt.Errorf("%w: message %d: tool use %q answered twice", ErrMalformedHistory, i, p.ID)
		}
		uses[p.ID] = true
	}
	return nil
}

// checkUses checks the tool uses of the assistant message msgs[i].
func checkUses(msgs []message.Message, i int) error {
	seen := make(map[string]bool)
	for _, p := range msgs[i].Parts {
		if p.Kind != message.KindToolUse {
			continue
		}
		if p.ID == "" {
			return fmt.Errorf("%w: message %d: tool use %q has no ID", ErrMalformedHistory, i, p.Name)
		}
		if seen[p.ID] {
			return fmt.Errorf("%w: message %d: duplicate tool use ID %q", ErrMalformedHistory, i, p.ID)
		}
		seen[p.ID] = true
	}
	if len(seen) == 0 {
		return nil
	}
	if i+1 >= len(msgs) || msgs[i+1].Role != message.Tool {
		p, _ := firstOfKind(msgs[i].Parts, message.KindToolUse)
		return fmt.Errorf("%w: message %d: tool use %q (%s) is not answered by a tool message right after it", ErrMalformedHistory, i, p.ID, p.Name)
	}
	answered := make(map[string]bool)
	for _, p := range msgs[i+1].Parts {
		if p.Kind == message.KindToolResult {
			answered[p.ID] = true
		}
	}
	for _, p := range msgs[i].Parts {
		if p.Kind == message.KindToolUse && !answered[p.ID] {
			return fmt.Errorf("%w: message %d: tool use %q (%s) has no result in message %d", ErrMalformedHistory, i, p.ID, p.Name, i+1)
		}
	}
	return nil
}
