package message_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/markov-agents/markov/message"
)

// TestHistoryShared checks the shared prefix against VisibleTo: it ends
// at the first record or scoped message, however the history was built
// (at once, or appended one message or a few at a time), and never moves
// past it again.
func TestHistoryShared(t *testing.T) {
	user, reply := message.UserText("hi"), message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("hello")}}
	scoped := message.Message{Role: message.User, Parts: []message.Part{message.Text("for w1")}, Source: message.Source{To: "w1"}}
	record := message.Message{Role: message.Record, Parts: []message.Part{message.RecordPart("transition", nil)}, Source: message.Source{To: "root"}}
	tests := []struct {
		name string
		msgs []message.Message
		want int
	}{
		{"empty", nil, 0},
		{"all shared", []message.Message{user, reply, user}, 3},
		{"scoped", []message.Message{user, reply, scoped, user}, 2},
		{"record first", []message.Message{record, user, reply}, 0},
		{"record last", []message.Message{user, reply, record}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := message.NewHistory(tt.msgs).Shared(); got != tt.want {
				t.Errorf("NewHistory: Shared() = %d, want %d", got, tt.want)
			}
			for _, step := range []int{1, 2} {
				var h message.History
				for i := 0; i < len(tt.msgs); i += step {
					h.Append(tt.msgs[i:min(i+step, len(tt.msgs))]...)
				}
				if h.Shared() != tt.want || h.Len() != len(tt.msgs) {
					t.Errorf("appended %d at a time: Shared() = %d, Len() = %d; want %d, %d", step, h.Shared(), h.Len(), tt.want, len(tt.msgs))
				}
				if diff := cmp.Diff(tt.msgs, h.Messages(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("appended %d at a time: messages (-want +got):\n%s", step, diff)
				}
			}
			for i, m := range tt.msgs[:tt.want] {
				if !m.VisibleTo("root") || !m.VisibleTo("w2") {
					t.Errorf("message %d is in the shared prefix but hidden from an instance", i)
				}
			}
		})
	}
}

// TestHistoryClip checks that appending to a clipped copy, or to the
// messages handed out, never writes into the room the original appends
// into.
func TestHistoryClip(t *testing.T) {
	h := message.NewHistory(append(make([]message.Message, 0, 8), message.UserText("a")))
	c := h.Clip()
	c.Append(message.UserText("b"))
	_ = append(h.Messages(), message.UserText("c"))
	h.Append(message.UserText("d"))
	if got := c.Messages()[1].Text(); got != "b" {
		t.Errorf("the clipped copy's second message is %q, want b", got)
	}
	if got := h.Messages()[1].Text(); got != "d" {
		t.Errorf("the history's second message is %q, want d", got)
	}
}

// TestHistoryGrowth checks that a history appended to one message at a
// time doubles its array: it is copied about once per message it holds.
func TestHistoryGrowth(t *testing.T) {
	var h message.History
	grew := 0
	for range 10_000 {
		before := h.Messages()
		h.Append(message.UserText("x"))
		if len(before) > 0 && &before[0] != &h.Messages()[0] {
			grew++
		}
	}
	if grew > 14 {
		t.Errorf("10,000 appends moved the history %d times, want at most 14 (doubling)", grew)
	}
}

func ExampleHistory() {
	var h message.History
	h.Append(message.UserText("What is the status of order 42?"))
	h.Append(message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("Shipped.")}})
	// A message scoped to one instance: the others do not see it.
	h.Append(message.Message{Role: message.User, Parts: []message.Part{message.Text("check stock")}, Source: message.Source{To: "w1"}})
	fmt.Println(h.Len(), "messages,", h.Shared(), "seen by every instance")
	// Output: 3 messages, 2 seen by every instance
}
