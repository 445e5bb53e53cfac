package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
)

// PrintSteps runs steps, printing each with PrintStep, and returns the
// last step (the zero Step when there was none) or the first error.
func PrintSteps(w io.Writer, steps iter.Seq2[machine.Step, error]) (machine.Step, error) {
	var last machine.Step
	for st, err := range steps {
		if err != nil {
			return last, err
		}
		PrintStep(w, st)
		last = st
	}
	return last, nil
}

// PrintStep prints one step: its reason, its suspension events (but
// suspended: the pending calls are for PrintCall), the messages it
// produced and the replies held with a suspension.
func PrintStep(w io.Writer, st machine.Step) {
	fmt.Fprintf(w, "[step: %s, done: %v]\n", st.Reason, st.Done)
	for _, ev := range st.Events {
		if ev.Type == instance.EventSuspended {
			continue // the pending calls are printed on their own
		}
		fmt.Fprintf(w, "suspension %s %s (%s %s)\n", ev.SuspendID, ev.Type, ev.Kind, ev.Name)
	}
	for _, msg := range st.Messages {
		PrintMessage(w, "", msg)
	}
	for _, msg := range st.Held {
		PrintMessage(w, "(held until resumed) ", msg)
	}
	if st.Command != nil {
		fmt.Fprintf(w, "command result: %s\n", jsonText(st.Command))
	}
}

// PrintMessage prints the parts of msg, one line each, prefixed by
// prefix.
func PrintMessage(w io.Writer, prefix string, msg message.Message) {
	for _, p := range msg.Parts {
		switch p.Kind {
		case message.KindText:
			fmt.Fprintf(w, "%s%s: %s\n", prefix, msg.Role, p.Text)
		case message.KindToolUse:
			fmt.Fprintf(w, "%s%s calls %s %s\n", prefix, msg.Role, p.Name, p.Data)
		case message.KindToolResult:
			status := "result"
			if p.IsError {
				status = "error"
			}
			fmt.Fprintf(w, "%stool %s: %s\n", prefix, status, p.Text)
		case message.KindThinking:
			fmt.Fprintf(w, "%s%s thinks: %s\n", prefix, msg.Role, oneLine(p.Text, 200))
		case message.KindStructured:
			fmt.Fprintf(w, "%s%s (structured): %s\n", prefix, msg.Role, p.Data)
		case message.KindRecord:
			fmt.Fprintf(w, "%srecord %s %s\n", prefix, p.Name, p.Data)
		}
	}
}

// PrintCall prints a pending suspended call the way an approval queue
// would: suspend ID, instance, kind and name, input, metadata, the schema
// a resume payload must match, reason and deadline.
func PrintCall(w io.Writer, call instance.SuspendedCall) {
	fmt.Fprintf(w, "pending %s call\n", call.Kind)
	fmt.Fprintf(w, "  suspend ID: %s\n", call.SuspendID)
	fmt.Fprintf(w, "  instance:   %s\n", call.InstanceID)
	if call.Name != "" {
		fmt.Fprintf(w, "  %-11s %s\n", string(call.Kind)+":", call.Name)
	}
	if len(call.Input) > 0 {
		fmt.Fprintf(w, "  input:      %s\n", call.Input)
	}
	if len(call.Metadata) > 0 {
		fmt.Fprintf(w, "  metadata:   %s\n", call.Metadata)
	}
	if len(call.PayloadSchema) > 0 {
		fmt.Fprintf(w, "  payload:    %s\n", call.PayloadSchema)
	}
	fmt.Fprintf(w, "  reason:     %s\n", call.Reason)
	fmt.Fprintf(w, "  suspended:  %s\n", formatTime(call.SuspendedAt))
	if call.Deadline.IsZero() {
		fmt.Fprintf(w, "  deadline:   none\n")
		return
	}
	onTimeout := "the call fails"
	if call.OnTimeout.Resume {
		onTimeout = "the call resumes with " + string(call.OnTimeout.Payload)
	}
	fmt.Fprintf(w, "  deadline:   %s (%s after suspension); then %s\n",
		formatTime(call.Deadline), call.Deadline.Sub(call.SuspendedAt), onTimeout)
}

// PrintTree prints the instance tree under root, indented, with node
// names, states and suspensions.
func PrintTree(w io.Writer, root *instance.Instance) {
	printInstance(w, root, 1)
	for _, name := range slices.Sorted(maps.Keys(root.Packs)) {
		fmt.Fprintf(w, "  pack %s: %s\n", name, jsonText(root.Packs[name]))
	}
}

func printInstance(w io.Writer, in *instance.Instance, depth int) {
	ind := strings.Repeat("  ", depth)
	fmt.Fprintf(w, "%s%s (%s) %s\n", ind, in.Node, in.ID, instanceStatus(in))
	fmt.Fprintf(w, "%s  state: %s\n", ind, jsonText(in.State))
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
			fmt.Fprintf(w, "%s  suspension %s: %s %s %s, %s: %s\n", ind, c.SuspendID, c.Status, c.Kind, name, deadline, c.Reason)
		}
	}
	for _, ch := range in.Children {
		printInstance(w, ch, depth+1)
	}
}

func instanceStatus(in *instance.Instance) string {
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

// PrintSuspensions prints index entries as a table.
func PrintSuspensions(w io.Writer, list []store.Suspension, now time.Time) {
	tw := newTable(w)
	fmt.Fprintln(tw, "SUSPEND ID\tMACHINE\tCALL\tREASON\tDEADLINE")
	for _, s := range list {
		call := s.Kind
		if s.Name != "" {
			call += " " + s.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.MachineID, call, oneLine(s.Reason, 80), deadlineText(s.Deadline, now))
	}
	_ = tw.Flush()
}

// deadlineText formats a deadline with how far it is from now.
func deadlineText(d, now time.Time) string {
	if d.IsZero() {
		return "none"
	}
	left := d.Sub(now).Round(time.Second)
	if left <= 0 {
		return fmt.Sprintf("%s (passed %s ago)", formatTime(d), -left)
	}
	return fmt.Sprintf("%s (in %s)", formatTime(d), left)
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

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// Indent returns a writer that writes to w with prefix at the start of
// every line. It is not safe for concurrent use.
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
