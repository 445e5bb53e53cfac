package llm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

func TestCheckPairing(t *testing.T) {
	in := json.RawMessage(`{}`)
	user := message.UserText("hi")
	asst := func(parts ...message.Part) message.Message {
		return message.Message{Role: message.Assistant, Parts: parts}
	}
	tool := func(parts ...message.Part) message.Message {
		return message.Message{Role: message.Tool, Parts: parts}
	}
	use := func(id string) message.Part { return message.ToolUse(id, "lookup", in) }
	res := func(id string) message.Part { return message.ToolResult(id, "ok", false) }

	tests := []struct {
		name string
		msgs []message.Message
		// want is empty for a valid history, else substrings of the error.
		want []string
	}{
		{name: "empty"},
		{name: "text only", msgs: []message.Message{user, asst(message.Text("hello")), user}},
		{
			name: "one round trip",
			msgs: []message.Message{user, asst(message.Text("let me look"), use("a")), tool(res("a")), asst(message.Text("done"))},
		},
		{
			name: "parallel uses answered out of order",
			msgs: []message.Message{user, asst(use("a"), use("b")), tool(res("b"), res("a"))},
		},
		{
			name: "error result",
			msgs: []message.Message{user, asst(use("a")), tool(message.ToolResult("a", "boom", true))},
		},
		{
			name: "thinking and structured parts",
			msgs: []message.Message{user, asst(message.Thinking("hmm", "sig"), message.Structured(json.RawMessage(`{"a":1}`), `{"a":1}`))},
		},
		{
			name: "trailing unanswered use",
			msgs: []message.Message{user, asst(use("a"))},
			want: []string{"message 1", `"a"`, "not answered"},
		},
		{
			name: "use answered by a user message",
			msgs: []message.Message{user, asst(use("a")), user},
			want: []string{"message 1", `"a"`},
		},
		{
			name: "one of two uses unanswered",
			msgs: []message.Message{user, asst(use("a"), use("b")), tool(res("a"))},
			want: []string{"message 1", `"b"`, "no result in message 2"},
		},
		{
			name: "orphan result",
			msgs: []message.Message{user, asst(use("a")), tool(res("a"), res("zzz"))},
			want: []string{"message 2", `"zzz"`, "answers no tool use"},
		},
		{
			name: "tool message without uses before it",
			msgs: []message.Message{user, asst(message.Text("x")), tool(res("a"))},
			want: []string{"message 2", `"a"`},
		},
		{
			name: "tool message first",
			msgs: []message.Message{tool(res("a"))},
			want: []string{"message 0", `"a"`},
		},
		{
			name: "result in a user message",
			msgs: []message.Message{{Role: message.User, Parts: []message.Part{res("a")}}},
			want: []string{"message 0", `"a"`, "user message"},
		},
		{
			name: "use in a user message",
			msgs: []message.Message{{Role: message.User, Parts: []message.Part{use("a")}}},
			want: []string{"message 0", `"a"`},
		},
		{
			name: "answered twice",
			msgs: []message.Message{user, asst(use("a")), tool(res("a"), res("a"))},
			want: []string{"message 2", `"a"`, "twice"},
		},
		{
			name: "duplicate use ID",
			msgs: []message.Message{user, asst(use("a"), use("a")), tool(res("a"))},
			want: []string{"message 1", `"a"`, "duplicate"},
		},
		{
			name: "use without ID",
			msgs: []message.Message{user, asst(use("")), tool(res(""))},
			want: []string{"message 1", "no ID"},
		},
		{
			name: "record message",
			msgs: []message.Message{user, {Role: message.Record, Parts: []message.Part{message.RecordPart("cmd", nil)}}},
			want: []string{"message 1", "record"},
		},
		{
			name: "unknown role",
			msgs: []message.Message{{Role: "system"}},
			want: []string{"message 0", `"system"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := llm.CheckPairing(tt.msgs)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("CheckPairing: unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, llm.ErrMalformedHistory) {
				t.Fatalf("CheckPairing error = %v, want ErrMalformedHistory", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func ExampleCheckPairing() {
	msgs := []message.Message{
		message.UserText("weather in Paris?"),
		{Role: message.Assistant, Parts: []message.Part{
			message.ToolUse("call_1", "weather", json.RawMessage(`{"city":"Paris"}`)),
		}},
		// The tool result is missing.
	}
	err := llm.CheckPairing(msgs)
	fmt.Println(errors.Is(err, llm.ErrMalformedHistory))
	fmt.Println(err)
	// Output:
	// true
	// llm: malformed history: message 1: tool use "call_1" (weather) is not answered by a tool message right after it
}

func TestCheckRequest(t *testing.T) {
	hi := []message.Message{message.UserText("hi")}
	tests := []struct {
		name string
		req  *llm.Request
		want error // nil for a valid request
	}{
		{"valid", &llm.Request{Messages: hi, Tools: []llm.ToolSpec{{Name: "t"}, {Name: "u", InputSchema: json.RawMessage(" {} ")}}}, nil},
		{"nil", nil, llm.ErrNilRequest},
		{"unpaired tool use", &llm.Request{Messages: []message.Message{
			{Role: message.Assistant, Parts: []message.Part{message.ToolUse("use_1", "lookup", json.RawMessage(`{}`))}},
		}}, llm.ErrMalformedHistory},
		{"tool without a name", &llm.Request{Messages: hi, Tools: []llm.ToolSpec{{InputSchema: json.RawMessage(`{}`)}}}, llm.ErrInvalidSpec},
		{"tool schema not an object", &llm.Request{Messages: hi, Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}}, llm.ErrInvalidSpec},
		{"tool schema not JSON", &llm.Request{Messages: hi, Tools: []llm.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`{`)}}}, llm.ErrInvalidSpec},
		{"output schema missing", &llm.Request{Messages: hi, Output: &llm.OutputSpec{Name: "o"}}, llm.ErrInvalidSpec},
		{"output schema not JSON", &llm.Request{Messages: hi, Output: &llm.OutputSpec{Name: "o", Schema: json.RawMessage(`{"type":`)}}, llm.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := llm.CheckRequest(tt.req)
			if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
				t.Fatalf("CheckRequest = %v, want %v", err, tt.want)
			}
		})
	}
}
