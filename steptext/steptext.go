// Package steptext writes what a run did as plain text for people: the
// steps a machine.Run yields, the messages they carry, the calls a
// suspension leaves pending and the instance tree. The markov command
// line prints with it; a program that shows a run on a terminal or in a
// log can too.
//
// The output is one line per item, meant to be read, not parsed: it may
// change between versions. Programs that need a stable form encode the
// Step itself (encoding/json) or use the serialize package.
//
//	last, err := steptext.WriteAll(os.Stdout, m.Run(ctx, machine.UserText("hi")))
//
// Every function returns the first error of the writer. None of them is
// safe for concurrent use on one writer.
package steptext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// ThinkingWidth is how many characters of a thinking part are written; a
// longer one is cut with "…".
const ThinkingWidth = 200

// WriteAll runs steps, writing each with Write, and returns the last step
// (the zero Step when there was none) and the first error: the run's, or
// the writer's. It stops at the first error, so a failed writer stops the
// run at a step boundary.
func WriteAll(w io.Writer, steps iter.Seq2[machine.Step, error]) (machine.Step, error) {
	var last machine.Step
	for st, err := range steps {
		if err != nil {
			return last, err
		}
		if err := Write(w, st); err != nil {
			return st, err
		}
		last = st
	}
	return last, nil
}

// Write writes one step: a "[step: REASON, done: BOOL]" line, its
// suspension lifecycle events (but "suspended": the pending calls are for
// WriteCall), the messages it produced (see WriteMessage), the replies
// held with a suspension, prefixed "(held until resumed) ", and a
// command's result. When the messages come from more than one instance
// (workers running side by side), each line names the one it came from:
// "assistant (researcher i2) calls search {...}".
func Write(w io.Writer, st machine.Step) error {
	p := &printer{w: w, attribute: sources(st) > 1}
	p.printf("[step: %s, done: %v]\n", st.Reason, st.Done)
	for _, ev := range st.Events {
		if ev.Type == instance.EventSuspended {
			continue // the pending calls are written on their own
		}
		p.lifecycle(ev)
	}
	for _, msg := range st.Messages {
		p.message("", msg)
	}
	for _, msg := range st.Held {
		p.message("(held until resumed) ", msg)
	}
	if st.Command != nil {
		p.printf("command result: %s\n", jsonText(st.Command))
	}
	return p.err
}

// WriteMessage writes the parts of msg, one line each: "ROLE: TEXT" for
// text, "ROLE calls NAME INPUT" for a tool use, "tool result: TEXT" (or
// "tool error: TEXT") for a tool result, "ROLE thinks: TEXT" for thinking
// (cut at ThinkingWidth characters, on one line), "ROLE (structured):
// JSON" for structured output and "record NAME JSON" for an instance
// record.
func WriteMessage(w io.Writer, msg message.Message) error {
	p := &printer{w: w}
	p.message("", msg)
	return p.err
}

// WriteCall writes a pending suspended call the way an approval queue
// shows it: kind, suspend ID, instance, name, input, metadata, the schema
// a resume payload must match, reason, time and deadline, one field a
// line.
func WriteCall(w io.Writer, call instance.SuspendedCall) error {
	p := &printer{w: w}
	p.printf("pending %s call\n", call.Kind)
	p.printf("  suspend ID: %s\n", call.SuspendID)
	p.printf("  instance:   %s\n", call.InstanceID)
	if call.Name != "" {
		p.printf("  %-11s %s\n", string(call.Kind)+":", call.Name)
	}
	if len(call.Input) > 0 {
		p.printf("  input:      %s\n", call.Input)
	}
	if len(call.Metadata) > 0 {
		p.printf("  metadata:   %s\n", call.Metadata)
	}
	if len(call.PayloadSchema) > 0 {
		p.printf("  payload:    %s\n", call.PayloadSchema)
	}
	p.printf("  reason:     %s\n", call.Reason)
	p.printf("  suspended:  %s\n", formatTime(call.SuspendedAt))
	if call.Deadline.IsZero() {
		p.printf("  deadline:   none\n")
		return p.err
	}
	onTimeout := "the call fails"
	if call.OnTimeout.Resume {
		onTimeout = "the call resumes with " + string(call.OnTimeout.Payload)
	}
	p.printf("  deadline:   %s (%s after suspension); then %s\n",
		formatTime(call.Deadline), call.Deadline.Sub(call.SuspendedAt), onTimeout)
	return p.err
}

// WriteTree writes the instance tree under root, indented by depth: each
// instance's node, ID and status (active, idle, waiting for children,
// suspended), its state as JSON and its suspended calls; then the pack
// states of the root, by pack name.
func WriteTree(w io.Writer, root *instance.Instance) error {
	p := &printer{w: w}
	p.instance(root, 1)
	for _, name := range slices.Sorted(maps.Keys(root.Packs)) {
		p.printf("  pack %s: %s\n", name, jsonText(root.Packs[name]))
	}
	return p.err
}

// sources counts the instances the messages of st come from.
func sources(st machine.Step) int {
	ids := map[string]bool{}
	for _, msgs := range [][]message.Message{st.Messages, st.Held} {
		for _, msg := range msgs {
			if msg.Source.InstanceID != "" {
				ids[msg.Source.InstanceID] = true
			}
		}
	}
	return len(ids)
}

// printer writes formatted lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
	// attribute names the instance of every message line.
	attribute bool
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) message(prefix string, msg message.Message) {
	by := ""
	if src := msg.Source; p.attribute && src.InstanceID != "" {
		by = " (" + strings.TrimSpace(src.Node+" "+src.InstanceID) + ")"
	}
	for _, part := range msg.Parts {
		switch part.Kind {
		case message.KindText:
			p.printf("%s%s%s: %s\n", prefix, msg.Role, by, part.Text)
		case message.KindToolUse:
			p.printf("%s%s%s calls %s %s\n", prefix, msg.Role, by, part.Name, part.Data)
		case message.KindToolResult:
			status := "result"
			if part.IsError {
				status = "error"
			}
			p.printf("%stool %s%s: %s\n", prefix, status, by, part.Text)
		case message.KindThinking:
			p.printf("%s%s%s thinks: %s\n", prefix, msg.Role, by, OneLine(part.Text, ThinkingWidth))
		case message.KindStructured:
			p.printf("%s%s%s (structured): %s\n", prefix, msg.Role, by, part.Data)
		case message.KindRecord:
			p.printf("%srecord %s %s\n", prefix, part.Name, part.Data)
		}
	}
}

func (p *printer) instance(in *instance.Instance, depth int) {
	ind := strings.Repeat("  ", depth)
	p.printf("%s%s (%s) %s\n", ind, in.Node, in.ID, status(in))
	p.printf("%s  state: %s\n", ind, jsonText(in.State))
	if in.Suspension != nil {
		for _, c := range in.Suspension.Calls {
			deadline := "no deadline"
			if !c.Deadline.IsZero() {
				deadline = "deadline " + formatTime(c.Deadline)
			}
			name := c.Name
			if name == "" {
				name = "-"
			}
			p.printf("%s  suspension %s: %s %s %s, %s: %s\n", ind, c.SuspendID, c.Status, c.Kind, name, deadline, c.Reason)
		}
	}
	for _, ch := range in.Children {
		p.instance(ch, depth+1)
	}
}

func status(in *instance.Instance) string {
	switch {
	case in.Suspended():
		return fmt.Sprintf("[suspended: %d pending]", in.Suspension.PendingCount())
	case !in.IsLeaf():
		return "[waiting for children]"
	case in.Idle:
		return "[idle]"
	default:
		return "[active]"
	}
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// jsonText renders v as compact JSON, or with %v when it does not
// encode.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// FinalAnswer returns the text of the last assistant message of msgs that
// has text (a step's Messages, or a machine's History), or "".
func FinalAnswer(msgs []message.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == message.Assistant {
			if t := msgs[i].Text(); t != "" {
				return t
			}
		}
	}
	return ""
}

// OneLine flattens s to one line (runs of white space become one space)
// of at most n characters, cutting it with "…" when it is longer.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Indent returns a writer that writes to w with prefix at the start of
// every line, for nesting one output in another. It is not safe for
// concurrent use.
func Indent(w io.Writer, prefix string) io.Writer {
	return &prefixWriter{w: w, prefix: []byte(prefix)}
}

type prefixWriter struct {
	w      io.Writer
	prefix []byte
	mid    bool // inside a line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if !p.mid {
			if _, err := p.w.Write(p.prefix); err != nil {
				return 0, err
			}
			p.mid = true
		}
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
			p.mid = false
		}
		if _, err := p.w.Write(line); err != nil {
			return 0, err
		}
		b = b[len(line):]
	}
	return n, nil
}
