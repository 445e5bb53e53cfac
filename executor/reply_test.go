package executor

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

func TestRepairToolUses(t *testing.T) {
	use := func(id string) message.Part { return message.ToolUse(id, "t", json.RawMessage(`{}`)) }
	withInput := func(id, input string) message.Part { return message.ToolUse(id, "t", json.RawMessage(input)) }
	tests := []struct {
		name     string
		in       []message.Part
		want     []string
		inputs   []string // the inputs after the repair, when checked
		repaired int
	}{
		{"valid", []message.Part{message.Text("hi"), use("a"), use("b")}, []string{"a", "b"}, nil, 0},
		{"empty", []message.Part{use(""), use("")}, []string{"toolu_markov_4_1", "toolu_markov_4_2"}, nil, 2},
		{"duplicate keeps the first", []message.Part{use("x"), use("x"), use("y")}, []string{"x", "toolu_markov_4_2", "y"}, nil, 1},
		{"repaired ID already taken", []message.Part{use(""), use("toolu_markov_4_1")}, []string{"toolu_markov_4_1_2", "toolu_markov_4_1"}, nil, 1},
		{"text only", []message.Part{message.Text("hi")}, nil, nil, 0},
		{"input not JSON", []message.Part{withInput("a", `{"n": 1`), withInput("b", ``), withInput("c", ` {"n":1} `)},
			[]string{"a", "b", "c"}, []string{`"{\"n\": 1"`, `{}`, ` {"n":1} `}, 2},
		{"bad ID and input", []message.Part{withInput("", `nope`)}, []string{"toolu_markov_4_1"}, []string{`"nope"`}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := append([]message.Part(nil), tt.in...)
			calls := 0
			got, n := repairToolUses(tt.in, func() string { calls++; return "4" })
			if calls > 1 {
				t.Fatalf("the reply's ID was asked for %d times, want once at most", calls)
			}
			if n != tt.repaired {
				t.Fatalf("repaired %d, want %d", n, tt.repaired)
			}
			if d := cmp.Diff(orig, tt.in); d != "" {
				t.Fatalf("input modified:\n%s", d)
			}
			var ids, inputs []string
			for _, p := range got {
				if p.Kind == message.KindToolUse {
					ids = append(ids, p.ID)
					inputs = append(inputs, string(p.Data))
				}
			}
			if d := cmp.Diff(tt.want, ids); d != "" {
				t.Fatalf("IDs (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.inputs, inputs); tt.inputs != nil && d != "" {
				t.Fatalf("inputs (-want +got):\n%s", d)
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
