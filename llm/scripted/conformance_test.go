package scripted_test

import (
	"fmt"
	"testing"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/llmtest"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/message"
)

// providerError is the error a scripted reply fails with where the suite
// asks for a provider error: the scripted model returns a reply's Err as
// it is.
type providerError struct{ status int }

func (e *providerError) Error() string { return fmt.Sprintf("status %d", e.status) }

func TestConformance(t *testing.T) {
	llmtest.Run(t, llmtest.Harness{
		Name: "scripted",
		Caps: llmtest.Capabilities{Thinking: true},
		New: func(t *testing.T, replies ...llmtest.Reply) llmtest.Fake {
			script := make([]scripted.Reply, len(replies))
			for i, r := range replies {
				script[i] = scriptReply(t, r)
			}
			m := scripted.New(script...)
			return llmtest.Fake{Model: m, Calls: m.Calls}
		},
		APIError: llmtest.StatusOf(func(e *providerError) int { return e.status }),
	})
}

// scriptReply is r as a scripted reply.
func scriptReply(t *testing.T, r llmtest.Reply) scripted.Reply {
	t.Helper()
	if r.Status != 0 {
		return scripted.Reply{Err: fmt.Errorf("scripted: provider failed: %w", &providerError{r.Status})}
	}
	out := scripted.Reply{Stop: r.Response.StopReason, Usage: r.Response.Usage}
	switch r.Fault {
	case llmtest.FaultError:
		out.Err = fmt.Errorf("scripted: provider failed mid-stream: %w", &providerError{500})
	case llmtest.FaultEOF:
		out.Err = fmt.Errorf("scripted: %w", llm.ErrIncompleteStream)
	}
	for _, p := range r.Response.Message.Parts {
		switch p.Kind {
		case message.KindThinking:
			out.Thinking, out.Signature = p.Text, p.Signature
		case message.KindText, message.KindStructured:
			out.Text += p.Text
		case message.KindToolUse:
			out.Calls = append(out.Calls, scripted.Call{ID: p.ID, Name: p.Name, Input: p.Data})
		default:
			t.Fatalf("a scripted reply cannot hold a %v part", p.Kind)
		}
	}
	return out
}
