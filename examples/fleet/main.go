// Command fleet runs the refund agent of the approval example as a fleet
// on PostgreSQL (package durable/fleet, on River): this process accepts
// inputs and runs no machine; a second OS process — this program again,
// with the worker argument — is the fleet's worker and runs them.
//
// The first process creates a machine and accepts the customer's message;
// the worker runs it until the refund suspends for a manager. The first
// process then accepts the manager's approval — durable once Resume
// returns, whichever process dies — and the worker runs the machine to its
// final answer. Await follows the machine's event log from the first
// process, on LISTEN/NOTIFY.
//
//	go run ./examples/fleet postgres://postgres@127.0.0.1:5432/test?sslmode=disable [schema]
//
// The schema (default markov_example) is created, with River's tables, by
// whichever process opens it first. The model is scripted, so it runs
// offline; in production the processes are `markov serve` and `markov
// worker` (or your own binaries) on any number of hosts.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store/postgres"
)

// workerArg makes the program the fleet's worker.
const workerArg = "worker"

// DefaultSchema is the schema the example's tables live in.
const DefaultSchema = "markov_example"

const usage = `usage:
  fleet DATABASE_URL [SCHEMA]          accept inputs here, run them in a worker process
  fleet worker DATABASE_URL SCHEMA     the worker: run machines until SIGTERM`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// run is the command: the accepting process, or the worker.
func run(ctx context.Context, args []string, w io.Writer) error {
	switch {
	case len(args) == 3 && args[0] == workerArg:
		return work(ctx, args[1], args[2], w)
	case len(args) == 1 && args[0] != workerArg:
		return accept(ctx, args[0], DefaultSchema, w)
	case len(args) == 2 && args[0] != workerArg:
		return accept(ctx, args[0], args[1], w)
	}
	return errors.New(usage)
}

// fleet:open:begin

// open opens the shared database and a fleet of the refund charter on it.
func open(ctx context.Context, url, schema string) (*fleet.Fleet, *postgres.Store, error) {
	charter, err := refund.NewCharter(refund.ScriptedModel())
	if err != nil {
		return nil, nil, err
	}
	// Open creates the schema and migrates the store's tables and River's.
	s, err := postgres.Open(ctx, postgres.Config{ConnString: url, Schema: schema})
	if err != nil {
		return nil, nil, err
	}
	f, err := fleet.New(fleet.Config{Store: s, Charter: charter})
	if err != nil {
		return nil, nil, errors.Join(err, s.Close())
	}
	return f, s, nil
}

// fleet:open:end

// work is the worker process: it runs the fleet's machines until ctx ends,
// then lets the runs in progress finish.
func work(ctx context.Context, url, schema string, w io.Writer) (err error) {
	f, s, err := open(ctx, url, schema)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	// fleet:work:begin
	if err := f.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	fmt.Fprintln(w, "ready")
	<-ctx.Done() // SIGTERM
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return f.Stop(stop) // finishes the runs in progress, or hands them back
	// fleet:work:end
}

// accept is the accepting process: it starts a worker, hands it a
// customer's request and the manager's approval, and reports what the
// worker did.
func accept(ctx context.Context, url, schema string, w io.Writer) (err error) {
	f, s, err := open(ctx, url, schema)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	stopWorker, err := startWorker(ctx, url, schema)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopWorker()) }()

	// fleet:accept:begin
	id, err := f.Runner().Create(ctx, "", refund.NodeName, nil)
	if err != nil {
		return err
	}
	// Send returns once the message is committed with the job that runs it.
	a, err := f.Send(ctx, id, message.UserText(refund.CustomerRequest))
	if err != nil {
		return err
	}
	steps, err := f.Await(ctx, a) // the worker's run, followed from here
	if err != nil {
		return err
	}
	last := steps[len(steps)-1]
	if len(last.Suspensions) != 1 {
		return fmt.Errorf("the run ended with %s, not waiting for a manager", last.Reason)
	}
	fmt.Fprintf(w, "worker ran %s until it waits: %s\n", id, last.Suspensions[0].Reason)

	// The approval, from any process: durable once Resume returns.
	a, err = f.Resume(ctx, machine.ResumeInput{SuspendID: last.Suspensions[0].SuspendID, Payload: refund.Approval{Approved: true, Manager: "dana"}})
	if err != nil {
		return err
	}
	steps, err = f.Await(ctx, a)
	if err != nil {
		return err
	}
	// fleet:accept:end
	for _, st := range steps {
		for _, m := range st.Messages {
			if m.Role == message.Assistant && m.Text() != "" {
				fmt.Fprintf(w, "assistant: %s\n", m.Text())
			}
		}
	}
	fmt.Fprintf(w, "the run of %s ended: %s\n", id, steps[len(steps)-1].Reason)
	return nil
}

// startWorker starts this program as the fleet's worker and waits until it
// works; the function it returns stops it with SIGTERM and waits for it.
func startWorker(ctx context.Context, url, schema string) (func() error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, workerArg, url, schema)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		return nil, errors.Join(fmt.Errorf("worker: %q", line), err, cmd.Wait())
	}
	return func() error {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return err
		}
		return cmd.Wait()
	}, nil
}
