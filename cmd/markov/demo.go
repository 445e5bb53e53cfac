package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/markov-agents/markov/cmd/markov/cli"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/steptext"
	"github.com/markov-agents/markov/store"
)

// demoCommand runs the approval demo across two processes.
var demoCommand = cli.Command{
	Name:    "demo",
	Args:    "[--db FILE]",
	Summary: "run the refund demo: suspend here, resume in a second process (temporary database unless --db)",
	Run:     demo,
}

// managerDecision is the payload the second process resumes with.
var managerDecision = refund.Approval{Approved: true, Manager: "dana@example.com"}

// childPrefix starts every line the second process prints.
const childPrefix = "  │ "

// demo creates a machine in the database, runs the customer's request
// until the refund tool suspends, has a second process (this program,
// re-executed with "resume") resume it with the manager's approval, and
// prints the final state read back from the store.
func demo(ctx context.Context, c *cli.CLI, args []string) error {
	fs := c.FlagSet("demo")
	pos, err := c.Parse(fs, "demo", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("demo", "unexpected argument %q", pos[0])
	}
	w := c.Out()
	c.PrintModel()

	path, keep := c.DB()
	if !keep {
		dir, err := os.MkdirTemp("", "markov-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "markov.db")
		c.SetDB(path)
		fmt.Fprintf(w, "database: %s (temporary; pass --db FILE to keep it)\n", path)
	} else {
		fmt.Fprintf(w, "database: %s\n", path)
	}
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()

	id, calls, err := demoSuspend(ctx, c, db, path)
	if err != nil {
		return err
	}
	if err := demoResume(ctx, w, path, calls); err != nil {
		return err
	}
	if err := demoReadBack(ctx, w, db, id); err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(w, "\nexplore it: %[1]s inspect --db %[2]s %[3]s · %[1]s pending --db %[2]s\n", c.Name, shellQuote(path), id)
	}
	return nil
}

// demoSuspend is process 1's first part: it creates the machine, runs the
// customer's request until the refund tool suspends and prints the pending
// calls and the suspension index. It returns the machine's ID and calls.
func demoSuspend(ctx context.Context, c *cli.CLI, db *cli.DB, path string) (string, []instance.SuspendedCall, error) {
	w := c.Out()
	fmt.Fprintf(w, "\n── process 1 (pid %d): start a machine and run the customer's request\n", os.Getpid())
	id, err := db.Runner.Create(ctx, "", refund.NodeName, nil)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(w, "created machine %s (node %s)\n", id, refund.NodeName)
	fmt.Fprintf(w, "customer: %s\n", refund.CustomerRequest)
	// The run's events as they happen: text as the model streams it,
	// the tool call, the suspension.
	last, err := steptext.WriteEvents(w, db.Runner.RunEvents(ctx, id, machine.UserText(refund.CustomerRequest)))
	if err != nil {
		return "", nil, err
	}
	if !last.NeedsResume() {
		return "", nil, fmt.Errorf("the model ended its turn without requesting a refund, so there is nothing to resume (%s)", c.Model)
	}
	_, rev, err := db.Runner.Load(ctx, id)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(w, "\nprocess 1 stops here: machine %s waits in %s (revision %d); the suspension index holds\n", id, path, rev)
	list, err := db.Runner.Pending(ctx, store.Filter{MachineID: id})
	if err != nil {
		return "", nil, err
	}
	cli.PrintSuspensions(steptext.Indent(w, "  "), list, c.Charter.Now())
	return id, last.Suspensions, nil
}

// demoResume has the manager decide on each call, each in a second
// process that resumes it from the database at path.
func demoResume(ctx context.Context, w io.Writer, path string, calls []instance.SuspendedCall) error {
	decision, err := json.Marshal(managerDecision)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to start the second process: %w", err)
	}
	for i, call := range calls {
		fmt.Fprintf(w, "\n── the manager decides on %s: %s\n", call.SuspendID, decision)
		if err := resumeInChild(ctx, w, exe, i+2, path, call.SuspendID, string(decision)); err != nil {
			return err
		}
	}
	return nil
}

// demoReadBack prints machine id as process 1 reads it back from the
// store: the machine, the refund ledger and the final answer.
func demoReadBack(ctx context.Context, w io.Writer, db *cli.DB, id string) error {
	fmt.Fprintf(w, "\n── process 1 (pid %d): read the machine back from the store\n", os.Getpid())
	m, rev, err := db.Runner.Load(ctx, id)
	if err != nil {
		return err
	}
	cli.PrintMachine(w, id, rev, m, -1)
	if ledger, ok := m.Root().State.(refund.Ledger); ok {
		fmt.Fprintf(w, "ledger: refunded %v\n", ledger.Refunded)
	}
	if a := steptext.FinalAnswer(m.History()); a != "" {
		fmt.Fprintf(w, "final answer: %s\n", a)
	}
	return nil
}

// resumeInChild runs "exe resume --db path suspendID payload" as process
// number n, printing its output (stdout and stderr) indented.
func resumeInChild(ctx context.Context, w io.Writer, exe string, n int, path, suspendID, payload string) error {
	args := []string{"resume", "--db", path, suspendID, payload}
	cmd := exec.CommandContext(ctx, exe, args...)
	// One pipe for both streams, copied here after the header line, so
	// that nothing else writes to w meanwhile.
	r, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return fmt.Errorf("start the second process: %w", err)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	fmt.Fprintf(w, "── process %d (pid %d): markov %s\n", n, cmd.Process.Pid, strings.Join(quoted, " "))
	_, copyErr := io.Copy(steptext.Indent(w, childPrefix), r)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("process %d (%s resume): %w", n, filepath.Base(exe), err)
	}
	if copyErr != nil {
		return copyErr
	}
	fmt.Fprintf(w, "── process %d exited\n", n)
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
