package message_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/markov-agents/markov/message"
)

// TestHistorySeenBy checks the prefix each instance sees against
// VisibleTo: it is never longer than the instance's first hidden
// message, it covers an agent's own tool exchanges (scoped to it), and
// it is the same however the history was built (at once, or appended one
// message or a few at a time).
func TestHistorySeenBy(t *testing.T) {
	user, reply := message.UserText("hi"), message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("hello")}}
	to := func(id string) message.Message {
		return message.Message{Role: message.Tool, Parts: []message.Part{message.ToolResult("t", "ok", false)}, Source: message.Source{InstanceID: id, To: id}}
	}
	record := message.Message{Role: message.Record, Parts: []message.Part{message.RecordPart("transition", nil)}, Source: message.Source{To: "root"}}
	tests := []struct {
		name string
		msgs []message.Message
		want map[string]int // by instance
	}{
		{"empty", nil, map[string]int{"a": 0}},
		{"all shared", []message.Message{user, reply, user}, map[string]int{"a": 3, "b": 3}},
		{"own tool exchanges", []message.Message{user, to("a"), to("a"), reply, user}, map[string]int{"a": 5, "b": 1}},
		{"two instances", []message.Message{user, to("a"), reply, to("b"), user}, map[string]int{"a": 3, "b": 1, "c": 1}},
		{"record first", []message.Message{record, user, reply}, map[string]int{"a": 0, "root": 0}},
		{"record last", []message.Message{user, to("a"), record}, map[string]int{"a": 2, "b": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, h message.History) {
				t.Helper()
				for id, want := range tt.want {
					got := h.SeenBy(id)
					if got != want {
						t.Errorf("%s: SeenBy(%q) = %d, want %d", how, id, got, want)
					}
					for i, m := range tt.msgs[:min(got, len(tt.msgs))] {
						if !m.VisibleTo(id) {
							t.Errorf("%s: message %d is in the prefix %s sees but hidden from it", how, i, id)
						}
					}
				}
				if diff := cmp.Diff(tt.msgs, h.Messages(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: messages (-want +got):\n%s", how, diff)
				}
			}
			check("NewHistory", message.NewHistory(tt.msgs))
			for _, step := range []int{1, 2} {
				var h message.History
				for i := 0; i < len(tt.msgs); i += step {
					h.Append(tt.msgs[i:min(i+step, len(tt.msgs))]...)
				}
				check(fmt.Sprintf("appended %d at a time", step), h)
			}
		})
	}
}

// TestHistoryTranscript checks the transcript a history keeps against
// VisibleTo, on random histories of shared messages, exchanges scoped to
// a few instances and records, built at once and appended a few messages
// at a time: it is known for every instance while no message is scoped,
// then for the instance the first scoped message was for, records or
// not, or the one it was told to Follow, and it is always what that
// instance sees.
func TestHistoryTranscript(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "root"}
	kinds := []message.Message{
		message.UserText("hi"),
		{Role: message.Assistant, Parts: []message.Part{message.Text("hello")}},
		{Role: message.Tool, Parts: []message.Part{message.ToolResult("t", "a", false)}, Source: message.Source{To: "a"}},
		{Role: message.Tool, Parts: []message.Part{message.ToolResult("t", "b", false)}, Source: message.Source{To: "b"}},
		{Role: message.Record, Parts: []message.Part{message.RecordPart("suspended", nil)}},
		{Role: message.Record, Parts: []message.Part{message.RecordPart("transition", nil)}, Source: message.Source{To: "root"}},
	}
	for round := range 120 {
		msgs := make([]message.Message, rng.IntN(40))
		for i := range msgs {
			msgs[i] = kinds[rng.IntN(len(kinds))]
		}
		first := ""
		for _, m := range msgs {
			if m.Role != message.Record && m.Source.To != "" {
				first = m.Source.To
				break
			}
		}
		check := func(how string, h message.History) {
			t.Helper()
			for _, id := range ids {
				got, ok := h.Transcript(id)
				if want := first == "" || first == id; ok != want {
					t.Fatalf("round %d, %s: Transcript(%q) known %v, want %v", round, how, id, ok, want)
				}
				if !ok {
					continue
				}
				var want []message.Message
				for _, m := range msgs {
					if m.VisibleTo(id) {
						want = append(want, m)
					}
				}
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("round %d, %s: Transcript(%q) (-want +got):\n%s", round, how, id, diff)
				}
			}
		}
		check("NewHistory", message.NewHistory(slices.Clone(msgs)))
		var h message.History
		for i := 0; i < len(msgs); {
			n := 1 + rng.IntN(4)
			h.Append(msgs[i:min(i+n, len(msgs))]...)
			i += n
		}
		check("appended", h)
		check("clipped", h.Clip())

		// Follow: from a random point on, the history keeps b's
		// transcript, whoever the first scoped message was for.
		at := rng.IntN(len(msgs) + 1)
		f := message.NewHistory(slices.Clone(msgs[:at]))
		f.Follow("b")
		f.Append(msgs[at:]...)
		got, ok := f.Transcript("b")
		if !ok {
			t.Fatalf("round %d: Transcript(b) unknown after Follow(b)", round)
		}
		var want []message.Message
		for _, m := range msgs {
			if m.VisibleTo("b") {
				want = append(want, m)
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d: Transcript(b) after Follow(b) at %d (-want +got):\n%s", round, at, diff)
		}
		if diff := cmp.Diff(msgs, f.Messages(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d: messages after Follow (-want +got):\n%s", round, diff)
		}
		var records []int
		for i, m := range msgs {
			if m.Role == message.Record {
				records = append(records, i)
			}
		}
		if diff := cmp.Diff(records, f.Records(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d: records after Follow (-want +got):\n%s", round, diff)
		}
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

	// The same of the transcript a history keeps after a record.
	record := message.Message{Role: message.Record, Parts: []message.Part{message.RecordPart("suspended", nil)}}
	h = message.NewHistory(append(make([]message.Message, 0, 8), message.UserText("a"), record))
	h.Transcript("x") // built: the copies share it
	c = h.Clip()
	c.Append(message.UserText("b"))
	h.Append(message.UserText("d"))
	if got, _ := c.Transcript("x"); len(got) != 2 || got[1].Text() != "b" {
		t.Errorf("the clipped copy's transcript is %v, want a, b", got)
	}
	if got, _ := h.Transcript("x"); len(got) != 2 || got[1].Text() != "d" {
		t.Errorf("the history's transcript is %v, want a, d", got)
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
	fmt.Println(h.Len(), "messages;", h.SeenBy("w1"), "seen whole by w1,", h.SeenBy("w2"), "by w2")
	// Output: 3 messages; 3 seen whole by w1, 2 by w2
}

// A suspension writes a record, which no transcript shows: from there on
// the history keeps its agent's transcript, the messages it sees, so a
// machine restored from it does not copy them again.
func ExampleHistory_Transcript() {
	var h message.History
	h.Append(message.UserText("Refund order 42."))
	h.Append(message.Message{Role: message.Record, Parts: []message.Part{message.RecordPart("suspended", nil)}, Source: message.Source{To: "agent"}})
	h.Append(message.Message{Role: message.Tool, Parts: []message.Part{message.ToolResult("t1", "approved", false)}, Source: message.Source{To: "agent"}})
	h.Append(message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("Refunded.")}})
	t, ok := h.Transcript("agent")
	fmt.Println(h.Len(), "messages,", len(t), "in the agent's transcript:", ok)
	fmt.Println("records at", h.Records())
	_, ok = h.Transcript("worker")
	fmt.Println("another instance's is known:", ok)
	// Output:
	// 4 messages, 3 in the agent's transcript: true
	// records at [1]
	// another instance's is known: false
}
