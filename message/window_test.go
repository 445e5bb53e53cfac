package message_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/markov-agents/markov/message"
)

// TestWindow checks the window's cut: the last n messages, moved off tool
// results, never empty when the transcript is not, and the same for every
// transcript that ends alike and holds a message before the window.
func TestWindow(t *testing.T) {
	u := message.UserText("q")
	a := message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("a")}}
	call := message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse("t", "f", []byte(`{}`))}}
	res := message.Message{Role: message.Tool, Parts: []message.Part{message.ToolResult("t", "ok", false)}}
	roles := func(msgs []message.Message) string {
		s := ""
		for _, m := range msgs {
			s += string(m.Role[0])
		}
		return s
	}
	tests := []struct {
		msgs []message.Message
		n    int
		want string
	}{
		{[]message.Message{u, a, u, a}, 0, "uaua"},
		{[]message.Message{u, a, u, a}, 4, "uaua"},
		{[]message.Message{u, a, u, a}, 9, "uaua"},
		{[]message.Message{u, a, u, a}, 2, "ua"},
		{[]message.Message{u, a, u, a}, 3, "ua"},               // at a user message
		{[]message.Message{u, call, res, a, u}, 3, "u"},        // at a user message
		{[]message.Message{u, call, res, a, a}, 3, "aa"},       // off the result
		{[]message.Message{u, call, res, res, res}, 2, "attt"}, // back to the call
		{[]message.Message{res, res}, 1, "tt"},                 // nothing to go back to
		{nil, 3, ""},
	}
	for _, tt := range tests {
		if got := roles(message.Window(tt.msgs, tt.n)); got != tt.want {
			t.Errorf("Window(%s, %d) = %s, want %s", roles(tt.msgs), tt.n, got, tt.want)
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	pick := []message.Message{u, a, call, res, res}
	for range 500 {
		tail := make([]message.Message, 1+rng.IntN(20))
		for i := range tail {
			tail[i] = pick[rng.IntN(len(pick))]
		}
		n := 1 + rng.IntN(12)
		w := message.Window(tail, n)
		if len(w) == 0 || len(w) > len(tail) {
			t.Fatalf("Window(%s, %d) = %s", roles(tail), n, roles(w))
		}
		if len(w) < len(tail) && w[0].Role == message.Tool {
			t.Fatalf("Window(%s, %d) = %s starts at a result", roles(tail), n, roles(w))
		}
		if len(w) < len(tail) && w[0].Role != message.User && slices.ContainsFunc(tail[len(tail)-n:], func(m message.Message) bool { return m.Role == message.User }) {
			t.Fatalf("Window(%s, %d) = %s does not start at the user message after the cut", roles(tail), n, roles(w))
		}
		if len(w) == len(tail) {
			continue // the window reaches the tail's start: an older message could matter
		}
		full := append([]message.Message{u, call, res, a}, tail...)
		if got := message.Window(full, n); len(got) != len(w) {
			t.Fatalf("Window(%s, %d) = %s, but over the tail %s: %s", roles(full), n, roles(got), roles(tail), roles(w))
		}
	}
}

// A window keeps the end of a long conversation, starting at a user
// message.
func ExampleWindow() {
	msgs := []message.Message{
		message.UserText("Where is order 42?"),
		{Role: message.Assistant, Parts: []message.Part{message.ToolUse("t1", "lookup_order", []byte(`{"id":42}`))}},
		{Role: message.Tool, Parts: []message.Part{message.ToolResult("t1", "shipped", false)}},
		{Role: message.Assistant, Parts: []message.Part{message.Text("It has shipped.")}},
		message.UserText("And order 43?"),
		{Role: message.Assistant, Parts: []message.Part{message.Text("It leaves tomorrow.")}},
		message.UserText("Thanks!"),
	}
	for _, m := range message.Window(msgs, 4) {
		fmt.Println(m.Role, m.Text())
	}
	// Output:
	// user And order 43?
	// assistant It leaves tomorrow.
	// user Thanks!
}

// TestWindowFits checks WindowFits against its promise: when it holds
// for the end of a history, every longer history that ends alike gives
// each instance the same window over its transcript.
func TestWindowFits(t *testing.T) {
	visible := func(msgs []message.Message, id string) []message.Message {
		var out []message.Message
		for i := range msgs {
			if msgs[i].VisibleTo(id) {
				out = append(out, msgs[i])
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []message.Message {
		msgs := make([]message.Message, n)
		for i := range msgs {
			roles := []message.Role{message.User, message.Assistant, message.Tool, message.Tool, message.Record}
			msgs[i] = message.Message{Role: roles[rng.IntN(len(roles))], Parts: []message.Part{message.Text(fmt.Sprint(i))}}
			if rng.IntN(3) == 0 {
				msgs[i].Source.To = []string{"a", "b"}[rng.IntN(2)]
			}
		}
		return msgs
	}
	fits := 0
	for range 2000 {
		tail, n := random(1+rng.IntN(30)), 1+rng.IntN(8)
		ids := []string{"", "a", "b"}[:1+rng.IntN(3)]
		if !message.NewHistory(tail).WindowFits(n, ids...) {
			continue
		}
		fits++
		full := append(random(rng.IntN(20)), tail...)
		for _, id := range ids {
			want := message.Window(visible(tail, id), n)
			got := message.Window(visible(full, id), n)
			if len(got) != len(want) || len(got) > 0 && got[0].Parts[0].Text != want[0].Parts[0].Text {
				t.Fatalf("window of %q over the tail starts at %v, over the longer history at %v", id, want[0].Parts, got[0].Parts)
			}
		}
	}
	if fits < 200 {
		t.Fatalf("only %d of 2,000 random tails fit: the test checks too little", fits)
	}
	if message.NewHistory(random(10)).WindowFits(0, "a") {
		t.Error("a window of 0 (none) fits")
	}
}
