package steptext_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/steptext"
)

// newMachine returns a machine of one "assistant" node with a weather
// tool, answering with replies, and reproducible IDs.
func newMachine(replies ...scripted.Reply) *machine.Machine {
	type weatherIn struct {
		City string `json:"city"`
	}
	weather := node.NewTool("weather", "Current weather in a city.",
		func(_ *node.ToolContext[struct{}], in weatherIn) (string, error) {
			return "sunny, 21°C in " + in.City, nil
		})
	assistant, err := node.New("assistant", node.Config[struct{}]{Tools: []node.Tool[struct{}]{weather}})
	if err != nil {
		panic(err)
	}
	n := 0
	charter, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(replies...),
		Nodes: []*node.Node{assistant},
		NewID: func() string { n++; return "id" + strconv.Itoa(n) },
	})
	if err != nil {
		panic(err)
	}
	m, err := charter.NewMachine("assistant", nil)
	if err != nil {
		panic(err)
	}
	return m
}

func Example() {
	m := newMachine(
		scripted.Tool("weather", map[string]string{"city": "Paris"}),
		scripted.Text("It is sunny in Paris, 21°C."),
	)
	last, err := steptext.WriteAll(os.Stdout, m.Run(context.Background(), machine.UserText("Weather in Paris?")))
	if err != nil {
		panic(err)
	}
	fmt.Println("tree after the run:")
	if err := steptext.WriteTree(os.Stdout, last.Root); err != nil {
		panic(err)
	}
	// Output:
	// [step: tool_use, done: false]
	// assistant calls weather {"city":"Paris"}
	// tool result: sunny, 21°C in Paris
	// [step: end_turn, done: true]
	// assistant: It is sunny in Paris, 21°C.
	// tree after the run:
	//   assistant (id1) [idle]
	//     state: {}
}

func TestWriteMessage(t *testing.T) {
	var b bytes.Buffer
	msg := message.Message{Role: message.Assistant, Parts: []message.Part{
		{Kind: message.KindThinking, Text: "first\n\n  then"},
		{Kind: message.KindText, Text: "done"},
		{Kind: message.KindToolResult, Text: "boom", IsError: true},
	}}
	require.NoError(t, steptext.WriteMessage(&b, msg))
	require.Equal(t, "assistant thinks: first then\nassistant: done\ntool error: boom\n", b.String())
}

func TestOneLine(t *testing.T) {
	require.Equal(t, "a b c", steptext.OneLine(" a\n b\tc ", 10))
	require.Equal(t, "abcd…", steptext.OneLine("abcdefgh", 5))
	require.Equal(t, "äöü", steptext.OneLine("äöü", 3))
}

func TestIndent(t *testing.T) {
	var b bytes.Buffer
	w := steptext.Indent(&b, "> ")
	for _, s := range []string{"a", "b\nc", "\n", "\nd\n"} {
		_, err := io.WriteString(w, s)
		require.NoError(t, err)
	}
	require.Equal(t, "> ab\n> c\n> \n> d\n", b.String())
}

// errWriter fails every write after the first n bytes.
type errWriter struct{ n int }

var errFull = errors.New("disk full")

func (w *errWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errFull
	}
	w.n -= len(p)
	return len(p), nil
}

// A failing writer's error is returned, and WriteAll stops the run at the
// step it could not write.
func TestWriterErrors(t *testing.T) {
	m := newMachine(
		scripted.Tool("weather", map[string]string{"city": "Paris"}),
		scripted.Text("sunny"),
	)
	last, err := steptext.WriteAll(&errWriter{n: 40}, m.Run(context.Background(), machine.UserText("Weather?")))
	require.ErrorIs(t, err, errFull)
	require.Equal(t, machine.ToolUse, last.Reason, "the run stopped at its first step")
	require.ErrorIs(t, steptext.WriteTree(&errWriter{}, m.Root()), errFull)
	require.ErrorIs(t, steptext.Write(&errWriter{}, last), errFull)
	require.ErrorIs(t, steptext.WriteMessage(&errWriter{}, machine.UserText("hi")), errFull)
	_, err = steptext.Indent(&errWriter{}, "> ").Write([]byte("x\n"))
	require.ErrorIs(t, err, errFull)
}

func TestWriteCall(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	call := instance.SuspendedCall{
		SuspendID: "S1", InstanceID: "i1", Kind: instance.KindCommand, Name: "approve",
		Reason: "waiting", SuspendedAt: at, Deadline: at.Add(time.Hour),
		OnTimeout: instance.TimeoutAction{Resume: true, Payload: json.RawMessage(`"late"`)},
	}
	var b bytes.Buffer
	require.NoError(t, steptext.WriteCall(&b, call))
	require.Equal(t, `pending command call
  suspend ID: S1
  instance:   i1
  command:    approve
  reason:     waiting
  suspended:  2026-01-02T03:04:05Z
  deadline:   2026-01-02T04:04:05Z (1h0m0s after suspension); then the call resumes with "late"
`, b.String())
}

// When workers ran side by side, each line names its instance; a step
// of one instance reads as before.
func TestWriteAttributesWorkers(t *testing.T) {
	from := func(node, id string, parts ...message.Part) message.Message {
		return message.Message{Role: message.Assistant, Parts: parts, Source: message.Source{InstanceID: id, Node: node}}
	}
	result := func(node, id, text string) message.Message {
		return message.Message{Role: message.Tool, Parts: []message.Part{{Kind: message.KindToolResult, Text: text}},
			Source: message.Source{InstanceID: id, Node: node}}
	}
	use := message.Part{Kind: message.KindToolUse, Name: "search", Data: json.RawMessage(`{}`)}
	st := machine.Step{Reason: machine.ToolUse, Messages: []message.Message{
		from("researcher", "r2", use), result("researcher", "r2", "solar"),
		from("researcher", "r3", use), result("researcher", "r3", "wind"),
	}}
	var b bytes.Buffer
	require.NoError(t, steptext.Write(&b, st))
	require.Equal(t, `[step: tool_use, done: false]
assistant (researcher r2) calls search {}
tool result (researcher r2): solar
assistant (researcher r3) calls search {}
tool result (researcher r3): wind
`, b.String())

	b.Reset()
	st.Messages = st.Messages[:2]
	require.NoError(t, steptext.Write(&b, st))
	require.Equal(t, "[step: tool_use, done: false]\nassistant calls search {}\ntool result: solar\n", b.String())
}

func TestFinalAnswer(t *testing.T) {
	call := message.Message{Role: message.Assistant, Parts: []message.Part{message.ToolUse("t1", "lookup", json.RawMessage(`{}`))}}
	msgs := []message.Message{
		message.UserText("hi"),
		{Role: message.Assistant, Parts: []message.Part{message.Text("first")}},
		call,
		{Role: message.Tool, Parts: []message.Part{message.ToolResult("t1", "found", false)}},
	}
	require.Equal(t, "first", steptext.FinalAnswer(msgs), "a reply with only a tool call has no text")
	msgs = append(msgs, message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("last")}})
	require.Equal(t, "last", steptext.FinalAnswer(msgs))
	require.Empty(t, steptext.FinalAnswer(msgs[:1]))
	require.Empty(t, steptext.FinalAnswer(nil))
}
