// Command durable runs the refund agent of the approval example the way a
// small service would: its machines live in a SQLite file and run through a
// durable.Runner, which saves every step before yielding it.
//
// The first process creates a machine and runs the customer's request
// until the request_refund tool suspends for a manager's approval. It then
// starts a second OS process — itself, with the resume argument — which
// knows nothing but the file and the suspend ID: it finds the machine by
// that ID, resumes it with the manager's decision and prints the final
// answer.
//
//	go run ./examples/durable [file.db]
//
// Without a file, the database lives in a temporary directory removed at
// the end. The second process can also be run by hand, on the suspend ID a
// first one printed:
//
//	go run ./examples/durable resume file.db <suspend-id>
//
// The model is scripted, so it runs offline.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store/sqlite"
)

// resumeArg makes the program the second process.
const resumeArg = "resume"

const usage = `usage:
  durable [file.db]                      run until the refund waits for approval, then resume it in a second process
  durable resume <file.db> <suspend-id>  resume the suspension with a manager's approval and print the answer`

// decision is the manager's answer the second process resumes with.
var decision = refund.Approval{Approved: true, Manager: "dana"}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "durable:", err)
		os.Exit(1)
	}
}

// run is the command: both processes, or the second one alone.
func run(ctx context.Context, args []string, w io.Writer) error {
	switch {
	case len(args) == 0:
		dir, err := os.MkdirTemp("", "markov-durable-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		return start(ctx, filepath.Join(dir, "machines.db"), w)
	case len(args) == 1 && args[0] != resumeArg:
		return start(ctx, args[0], w)
	case len(args) == 3 && args[0] == resumeArg:
		return resume(ctx, args[1], args[2], w)
	}
	return errors.New(usage)
}

// logf writes one line of output, naming the process that writes it.
func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "[pid %d] "+format+"\n", append([]any{os.Getpid()}, args...)...)
}

// withRunner opens the SQLite file at path, runs fn with a Runner on it
// and the refund charter, and closes the file.
func withRunner(ctx context.Context, path string, fn func(*durable.Runner) error) (err error) {
	charter, err := refund.NewCharter(refund.ScriptedModel())
	if err != nil {
		return err
	}
	// durable:open:begin
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	r, err := durable.New(durable.Config{Store: s, Charter: charter})
	if err != nil {
		return err
	}
	// durable:open:end
	return fn(r)
}

// start creates a machine in the file at path, runs it until the refund
// suspends and hands the suspend ID to a second process.
func start(ctx context.Context, path string, w io.Writer) error {
	var suspendID string
	err := withRunner(ctx, path, func(r *durable.Runner) error {
		// durable:run:begin
		id, err := r.Create(ctx, "", refund.NodeName, nil)
		if err != nil {
			return err
		}
		logf(w, "created machine %s in %s", id, path)
		logf(w, "customer: %s", refund.CustomerRequest)
		for step, err := range r.Run(ctx, id, machine.UserText(refund.CustomerRequest)) {
			if err != nil {
				return err
			}
			if step.Reason != machine.Suspend {
				continue
			}
			for _, call := range step.Suspensions {
				logf(w, "suspended: %s (%s)", call.Name, call.Reason)
				suspendID = call.SuspendID
			}
		}
		// durable:run:end
		if suspendID == "" {
			return errors.New("the run ended without suspending")
		}
		return nil
	})
	if err != nil {
		return err
	}

	// Every step is in the file: this process may go. The second one is
	// this program again, told only the file and the suspend ID.
	logf(w, "suspend ID %s saved; handing over to a second process", suspendID)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe, resumeArg, path, suspendID)
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("second process: %w", err)
	}
	return nil
}

// resume finds the machine holding suspendID in the file at path, resumes
// it with the manager's decision and prints the final answer.
func resume(ctx context.Context, path, suspendID string, w io.Writer) error {
	if _, err := os.Stat(path); err != nil {
		return err // sqlite.Open would create an empty database
	}
	return withRunner(ctx, path, func(r *durable.Runner) error {
		// durable:resume:begin
		sp, err := r.Suspension(ctx, suspendID)
		if err != nil {
			return err
		}
		logf(w, "suspension %s of machine %s is %s; resuming: approved by %s", suspendID, sp.MachineID, sp.Status, decision.Manager)
		run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: decision})
		if err != nil {
			return err // refused, nothing changed: resolved already, a bad payload, …
		}
		for step, err := range run.Steps() {
			if err != nil {
				return err
			}
			for _, msg := range step.Messages {
				if msg.Role == message.Assistant && msg.Text() != "" {
					logf(w, "assistant: %s", msg.Text())
				}
			}
		}
		// durable:resume:end
		m, _, err := r.Load(ctx, sp.MachineID)
		if err != nil {
			return err
		}
		ledger, _ := m.Root().State.(refund.Ledger)
		logf(w, "refunded: %s", strings.Join(ledger.Refunded, ", "))
		return nil
	})
}
