// Command streaming shows a run as it happens: first in process, ranging
// over Machine.Events (text as the model streams it, tool calls,
// suspensions, state changes, the steps), then from the durable event log,
// as any process sharing the store would follow it with Runner.Watch.
//
//	go run ./examples/streaming
//
// It runs the refund agent of the approval example on the scripted model
// (which streams its replies in chunks) and a temporary SQLite file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store/sqlite"
)

func main() {
	dir, err := os.MkdirTemp("", "markov-streaming-")
	if err == nil {
		defer os.RemoveAll(dir)
		err = Run(context.Background(), filepath.Join(dir, "m.db"), os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "streaming:", err)
		os.Exit(1)
	}
}

// Run streams a refund request in process, resumes it durably in the
// SQLite file at path and replays the machine's event log, writing both
// to w.
func Run(ctx context.Context, path string, w io.Writer) (err error) {
	m, err := refund.NewMachine(refund.ScriptedModel())
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "== in process")
	if err := stream(ctx, m, w); err != nil {
		return err
	}

	charter, err := refund.NewCharter(refund.ScriptedModel())
	if err != nil {
		return err
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	runner, err := durable.New(durable.Config{Store: s, Charter: charter})
	if err != nil {
		return err
	}
	id, err := runner.Create(ctx, "", refund.NodeName, nil)
	if err != nil {
		return err
	}
	for _, err := range runner.Run(ctx, id, machine.UserText(refund.CustomerRequest)) {
		if err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "== from the event log")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := watch(ctx, runner, id, 0, w, cancel); !errors.Is(err, context.Canceled) {
		return err // a watch ends when its context does: here, at the suspension
	}
	return nil
}

// stream runs the customer's request on m and writes its events to w.
func stream(ctx context.Context, m *machine.Machine, w io.Writer) error {
	// streaming:events:begin
	for e, err := range m.Events(ctx, machine.UserText(refund.CustomerRequest)) {
		if err != nil {
			return err
		}
		switch e.Kind {
		case machine.EventTextDelta:
			fmt.Fprint(w, e.Text) // as the model streams it
		case machine.EventToolStarted:
			fmt.Fprintf(w, "\n→ %s %s\n", e.Tool.Name, e.Tool.Input)
		case machine.EventSuspended:
			fmt.Fprintf(w, "waiting: %s\n", e.Call.Reason)
		case machine.EventStep:
			// e.Step is what Run would have yielded: save it, show it.
		}
	}
	// streaming:events:end
	return nil
}

// watch writes the events of machine id logged after lastSeq to w, and
// calls stop at the suspension the run ended with: a watcher waits for
// more events until its context ends, and then returns its error.
func watch(ctx context.Context, runner *durable.Runner, id string, lastSeq int64, w io.Writer, stop func()) error {
	// streaming:watch:begin
	for e, err := range runner.Watch(ctx, id, lastSeq) {
		if err != nil {
			return err
		}
		if e.Seq > 0 {
			lastSeq = e.Seq // resume from here after a disconnection
		}
		switch {
		case e.Kind == machine.EventTextDelta && !e.Echo:
			fmt.Fprintf(w, "%d: text %q\n", e.Seq, e.Text)
		case e.Kind == machine.EventSuspended:
			fmt.Fprintf(w, "%d: waiting: %s\n", e.Seq, e.Call.Reason)
			stop()
		}
	}
	// streaming:watch:end
	return nil
}
