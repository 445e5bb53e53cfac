package executor

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

func TestRepairToolUseIDs(t *testing.T) {
	use := func(id string) message.Part { return message.ToolUse(id, "t", json.RawMessage(`{}`)) }
	tests := []struct {
		name     string
		in       []message.Part
		want     []string
		repaired int
	}{
		{"valid", []message.Part{message.Text("hi"), use("a"), use("b")}, []string{"a", "b"}, 0},
		{"empty", []message.Part{use(""), use("")}, []string{"toolu_markov_4_1", "toolu_markov_4_2"}, 2},
		{"duplicate keeps the first", []message.Part{use("x"), use("x"), use("y")}, []string{"x", "toolu_markov_4_2", "y"}, 1},
		{"repaired ID already taken", []message.Part{use(""), use("toolu_markov_4_1")}, []string{"toolu_markov_4_1_2", "toolu_markov_4_1"}, 1},
		{"text only", []message.Part{message.Text("hi")}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := append([]message.Part(nil), tt.in...)
			got, n := repairToolUseIDs(tt.in, 4)
			if n != tt.repaired {
				t.Fatalf("repaired %d, want %d", n, tt.repaired)
			}
			if d := cmp.Diff(orig, tt.in); d != "" {
				t.Fatalf("input modified:\n%s", d)
			}
			var ids []string
			for _, p := range got {
				if p.Kind == message.KindToolUse {
					ids = append(ids, p.ID)
				}
			}
			if d := cmp.Diff(tt.want, ids); d != "" {
				t.Fatalf("IDs (-want +got):\n%s", d)
			}
			// The reply, answered, is a transcript providers accept.
			var results []message.Part
			for _, id := range ids {
				results = append(results, message.ToolResult(id, "ok", false))
			}
			msgs := []message.Message{{Role: message.Assistant, Parts: got}}
			if len(results) > 0 {
				msgs = append(msgs, message.Message{Role: message.Tool, Parts: results})
			}
			if err := llm.CheckPairing(msgs); err != nil {
				t.Fatal(err)
			}
		})
	}
}
