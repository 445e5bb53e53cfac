package message_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
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

// historyKinds are the messages the random histories below are made of:
// shared ones, exchanges scoped to a, b and root, and records (one
// scoped to root).
var historyKinds = []message.Message{
	message.UserText("hi"),
	{Role: message.Assistant, Parts: []message.Part{message.Text("hello")}},
	{Role: message.Tool, Parts: []message.Part{message.ToolResult("t", "a", false)}, Source: message.Source{To: "a"}},
	{Role: message.Tool, Parts: []message.Part{message.ToolResult("t", "b", false)}, Source: message.Source{To: "b"}},
	{Role: message.Assistant, Parts: []message.Part{message.Text("root")}, Source: message.Source{To: "root"}},
	{Role: message.Record, Parts: []message.Part{message.RecordPart("suspended", nil)}},
	{Role: message.Record, Parts: []message.Part{message.RecordPart("transition", nil)}, Source: message.Source{To: "root"}},
}

// checkHistoryOps plays ops (a byte each, and the bytes they take) on
// two histories of the same messages: a plain slice with no room past
// its end, as an application hands one over, and the same messages with
// room, as serialize decodes them. Both must hold the messages appended,
// give the same answer to every Transcript call, and that answer must
// be what the instance sees (VisibleTo); SeenBy must never count a
// message hidden from the instance; a clipped copy appended to must
// leave the history as it was.
func checkHistoryOps(t *testing.T, ops []byte) {
	ids := []string{"a", "b", "root", "c"}
	next := func() byte {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		return b
	}
	var want []message.Message
	for range int(next()) % 48 {
		want = append(want, historyKinds[int(next())%len(historyKinds)])
	}
	plain := message.NewHistory(slices.Clone(want))
	roomy := message.NewHistory(append(make([]message.Message, 0, len(want)*2), want...))
	hs := map[string]*message.History{"plain": &plain, "roomy": &roomy}
	visible := func(id string) []message.Message {
		var out []message.Message
		for _, m := range want {
			if m.VisibleTo(id) {
				out = append(out, m)
			}
		}
		return out
	}
	for step := 0; len(ops) > 0; step++ {
		switch op := next(); op % 6 {
		case 0, 1: // append one to four messages
			add := make([]message.Message, 1+int(next())%4)
			for i := range add {
				add[i] = historyKinds[int(next())%len(historyKinds)]
			}
			want = append(want, add...)
			for _, h := range hs {
				h.Append(add...)
			}
		case 2: // the transcript of an instance
			id := ids[int(next())%len(ids)]
			pt, pok := plain.Transcript(id)
			rt, rok := roomy.Transcript(id)
			if pok != rok {
				t.Fatalf("step %d: Transcript(%q) known %v from the plain slice, %v with room", step, id, pok, rok)
			}
			if !pok {
				continue
			}
			if want := visible(id); !sameMessages(want, pt) {
				t.Fatalf("step %d: Transcript(%q) of the plain slice (-want +got):\n%s", step, id, cmp.Diff(want, pt, cmpopts.EquateEmpty()))
			}
			if !sameMessages(pt, rt) {
				t.Fatalf("step %d: Transcript(%q), plain (-) and with room (+):\n%s", step, id, cmp.Diff(pt, rt, cmpopts.EquateEmpty()))
			}
		case 3:
			id := ids[int(next())%len(ids)]
			for _, h := range hs {
				h.Follow(id)
			}
		case 4: // a clipped copy's appends do not reach the history
			for _, h := range hs {
				c := h.Clip()
				c.Append(message.UserText("the copy's"))
				c.Transcript("a")
			}
		case 5:
			for name, h := range hs {
				if got := h.Messages(); !sameMessages(want, got) {
					t.Fatalf("step %d: %s: messages (-want +got):\n%s", step, name, cmp.Diff(want, got, cmpopts.EquateEmpty()))
				}
			}
		}
		for name, h := range hs {
			if h.Len() != len(want) {
				t.Fatalf("step %d: %s: Len %d, want %d", step, name, h.Len(), len(want))
			}
			for _, id := range ids {
				for i, m := range want[:h.SeenBy(id)] {
					if !m.VisibleTo(id) {
						t.Fatalf("step %d: %s: message %d is in the prefix %s sees but hidden from it", step, name, i, id)
					}
				}
			}
		}
	}
	for name, h := range hs {
		if diff := cmp.Diff(want, h.Messages(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: messages (-want +got):\n%s", name, diff)
		}
	}
}

// sameMessages reports whether a and b hold the same messages of
// historyKinds (whose copies share their parts' array), faster than
// comparing them field by field.
func sameMessages(a, b []message.Message) bool {
	return slices.EqualFunc(a, b, func(x, y message.Message) bool {
		return x.Role == y.Role && x.Source == y.Source && len(x.Parts) == len(y.Parts) && &x.Parts[0] == &y.Parts[0]
	})
}

// FuzzHistory plays random operations on a history of a plain slice and
// one with room (checkHistoryOps).
func FuzzHistory(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{10, 0, 1, 0, 1, 0, 2, 0, 2, 2, 2, 5})                  // shared, then appended
	f.Add([]byte{6, 5, 0, 1, 0, 1, 0, 0, 1, 0, 2, 2, 2, 0, 0, 2, 2})    // a record first
	f.Add([]byte{6, 0, 1, 4, 6, 0, 0, 2, 2, 0, 0, 0, 2, 2, 5, 4, 2, 2}) // a record in between
	f.Add([]byte{4, 0, 2, 3, 1, 3, 1, 2, 0, 0, 3, 2, 1, 2, 1, 5})       // scoped to others, Follow
	f.Fuzz(checkHistoryOps)
}

// TestHistoryOps runs checkHistoryOps on random operations.
func TestHistoryOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 150 {
		ops := make([]byte, rng.IntN(200))
		for i := range ops {
			ops[i] = byte(rng.UintN(256))
		}
		checkHistoryOps(t, ops)
	}
}

// TestHistoryShares checks that a transcript that is one run of the
// history's messages is the history's own, not a copy, from a plain
// slice as from one with room: every message, the messages before a
// record, after records, or before another instance's exchange.
func TestHistoryShares(t *testing.T) {
	user, reply := message.UserText("hi"), message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("hello")}}
	record := message.Message{Role: message.Record, Parts: []message.Part{message.RecordPart("suspended", nil)}}
	other := message.Message{Role: message.Tool, Parts: []message.Part{message.ToolResult("t", "ok", false)}, Source: message.Source{To: "b"}}
	tests := []struct {
		name   string
		msgs   []message.Message
		lo, hi int // the span of a's transcript
	}{
		{"shared", []message.Message{user, reply, user}, 0, 3},
		{"records first", []message.Message{record, record, user, reply}, 2, 4},
		{"record last", []message.Message{user, reply, record}, 0, 2},
		{"another's last", []message.Message{user, reply, other, record}, 0, 2},
	}
	for _, tt := range tests {
		for how, msgs := range map[string][]message.Message{"plain": slices.Clone(tt.msgs), "with room": append(make([]message.Message, 0, 16), tt.msgs...)} {
			h := message.NewHistory(msgs)
			h.Follow("a")
			var got []message.Message
			if allocs := testing.AllocsPerRun(10, func() { got, _ = h.Transcript("a") }); allocs != 0 {
				t.Errorf("%s, %s: Transcript allocates %v times", tt.name, how, allocs)
			}
			if len(got) != tt.hi-tt.lo || &got[0] != &msgs[tt.lo] {
				t.Errorf("%s, %s: the transcript is not messages %d to %d of the history", tt.name, how, tt.lo, tt.hi)
			}
		}
	}
	// A message a sees after one it does not: the next Transcript call
	// copies, the history's messages unchanged.
	msgs := []message.Message{user, record}
	h := message.NewHistory(msgs)
	h.Transcript("a")
	h.Append(reply)
	got, _ := h.Transcript("a")
	if want := []message.Message{user, reply}; !cmp.Equal(want, got) {
		t.Errorf("after a record, the transcript is %v, want %v", got, want)
	}
	if !cmp.Equal([]message.Message{user, record}, msgs) {
		t.Errorf("the plain slice changed: %v", msgs)
	}
}

// TestHistoryPlainSlice checks that a history appended to past a plain
// slice (no room) leaves the slice's array as it was until a read needs
// every message in one slice, which copies them once.
func TestHistoryPlainSlice(t *testing.T) {
	msgs := make([]message.Message, 1000)
	for i := range msgs {
		msgs[i] = message.UserText(strconv.Itoa(i))
	}
	h := message.NewHistory(msgs)
	first, _ := h.Transcript("a")
	for i := range 10 {
		h.Append(message.UserText("more " + strconv.Itoa(i)))
	}
	if &first[0] != &msgs[0] || h.Len() != 1010 {
		t.Fatalf("the first transcript is not the slice, or the history lost messages (%d)", h.Len())
	}
	all := h.Messages()
	if &all[0] == &msgs[0] || len(all) != 1010 || all[1009].Text() != "more 9" || all[999].Text() != "999" {
		t.Fatalf("Messages did not join the messages appended past the slice into one array")
	}
	if again := h.Messages(); &again[0] != &all[0] {
		t.Errorf("a second read copied the messages again")
	}
}
