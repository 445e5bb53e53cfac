// Command deadlines shows a suspension with a deadline and an on-timeout
// action: an expense assistant files an expense and asks a manager to
// approve it within 48 hours; nobody answers, and at the deadline durable's
// sweeper resolves the call with a rejection, which goes through the
// tool's resume handler like a manager's answer would.
//
// Nobody waits 48 hours for a demo: the charter reads the time from a
// clock this program moves forward (CharterConfig.Clock), as a test does.
// In production leave Clock nil (time.Now) and run the sweeper in the
// background (durable.Runner.RunSweeper), or use a fleet, whose deadlines
// are jobs on the database's clock.
//
//	go run ./examples/deadlines
//
// The model is scripted and the machines live in a temporary SQLite file,
// so it runs offline.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/sqlite"
)

// deadlines:types:begin

// Expense is one expense the assistant filed.
type Expense struct {
	Amount  int    `json:"amount" jsonschema:"the amount in euros"`
	Purpose string `json:"purpose"`
	Status  string `json:"status,omitempty" jsonschema:"pending, approved or rejected"`
}

// Ledger is the assistant's state.
type Ledger struct {
	Expenses []Expense `json:"expenses"`
}

// Decision is what a manager answers, and what the deadline answers for
// them.
type Decision struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note,omitempty"`
}

// deadlines:types:end

// NodeName is the assistant's node.
const NodeName = "expenses"

// ApprovalWindow is how long a manager has to decide.
const ApprovalWindow = 48 * time.Hour

// NewCharter returns the expense assistant's charter: one node whose
// file_expense tool files the expense as pending and suspends for a
// manager's Decision, rejected on timeout after ApprovalWindow. clock is
// the charter's clock (nil: time.Now).
func NewCharter(model llm.Model, clock func() time.Time) (*machine.Charter, error) {
	// deadlines:tool:begin
	fileExpense := node.NewTool("file_expense", "File an expense; a manager approves it.",
		func(ctx *node.ToolContext[Ledger], in Expense) (string, error) {
			// This update is kept: the ledger shows the expense as pending
			// while the call waits.
			if err := ctx.Update(func(l *Ledger) {
				l.Expenses = append(l.Expenses, Expense{Amount: in.Amount, Purpose: in.Purpose, Status: "pending"})
			}); err != nil {
				return "", err
			}
			return "", ctx.Suspend("expense needs a manager's approval",
				instance.WithMetadata(in),
				instance.WithTimeout(ApprovalWindow),
				instance.OnTimeoutResume(Decision{Approved: false, Note: "no answer within 48h"}, false))
		},
		// The resume handler runs for a manager's decision and for the
		// on-timeout payload alike; r.Cause tells them apart
		// (instance.CauseExplicit, instance.CauseTimeout). Its payload
		// type, Decision, is the one a resume must fit.
		node.OnResume(func(ctx *node.ToolContext[Ledger], in Expense, r node.Resumed[Decision]) (string, error) {
			d := r.Payload
			status := "rejected"
			if d.Approved {
				status = "approved"
			}
			if err := ctx.Update(func(l *Ledger) {
				for i := range l.Expenses {
					if l.Expenses[i].Purpose == in.Purpose && l.Expenses[i].Status == "pending" {
						l.Expenses[i].Status = status
					}
				}
			}); err != nil {
				return "", err
			}
			return fmt.Sprintf("expense %s: %s (%s)", in.Purpose, status, d.Note), nil
		}))
	// deadlines:tool:end

	assistant, err := node.New(NodeName, node.Config[Ledger]{
		Instructions: "File the user's expenses with file_expense and report the manager's decision.",
		Tools:        []node.Tool[Ledger]{fileExpense},
	})
	if err != nil {
		return nil, err
	}
	// deadlines:charter:begin
	return machine.NewCharter(machine.CharterConfig{
		Model: model,
		Nodes: []*node.Node{assistant},
		Clock: clock, // nil: time.Now; deadlines are set and judged on it
	})
	// deadlines:charter:end
}

// ScriptedModel plays the assistant: it files one expense, then reports
// the decision it gets back. Its reply follows from the request alone, not
// from the replies it gave before, so a machine resumed by another
// process — a restart after a crash — gets the reply that follows.
func ScriptedModel() *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
			return scripted.Text("Your conference ticket was rejected: no manager answered within 48 hours."), nil
		}
		return scripted.Tool("file_expense", Expense{Amount: 420, Purpose: "conference ticket"}), nil
	})
}

// Clock is a clock the demo moves forward; safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func main() {
	dir, err := os.MkdirTemp("", "markov-deadlines-")
	if err == nil {
		defer os.RemoveAll(dir)
		err = Run(context.Background(), filepath.Join(dir, "expenses.db"), &Clock{now: time.Now()}, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deadlines:", err)
		os.Exit(1)
	}
}

// Run files an expense on a new machine in the SQLite file at path, lets
// the approval window pass on clock, sweeps, and writes what happens to w.
func Run(ctx context.Context, path string, clock *Clock, w io.Writer) (err error) {
	charter, err := NewCharter(ScriptedModel(), clock.Now)
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
	id, err := runner.Create(ctx, "", NodeName, nil)
	if err != nil {
		return err
	}
	for step, err := range runner.Run(ctx, id, machine.UserText("File my 420 € conference ticket.")) {
		if err != nil {
			return err
		}
		for _, c := range step.Suspensions {
			fmt.Fprintf(w, "waiting for a manager until %s: %s\n", c.Deadline.Format(time.RFC3339), c.Reason)
		}
	}
	if err := report(ctx, runner, id, w); err != nil {
		return err
	}

	// deadlines:sweep:begin
	// Before the deadline the sweeper finds nothing to do.
	n, err := runner.Sweep(ctx, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "swept %d before the deadline\n", n)

	clock.Advance(ApprovalWindow + time.Minute)
	// At the deadline it claims the suspension and runs its machine: the
	// on-timeout payload goes through the resume handler, then the model
	// answers. A service runs runner.RunSweeper(ctx, time.Second) instead.
	n, err = runner.Sweep(ctx, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "swept %d after the deadline\n", n)
	// deadlines:sweep:end
	return report(ctx, runner, id, w)
}

// report writes the machine's ledger and its last answer to w.
func report(ctx context.Context, runner *durable.Runner, id string, w io.Writer) error {
	m, _, err := runner.Load(ctx, id)
	if err != nil {
		return err
	}
	ledger, _ := m.Root().State.(Ledger)
	for _, e := range ledger.Expenses {
		fmt.Fprintf(w, "ledger: %s, %d €, %s\n", e.Purpose, e.Amount, e.Status)
	}
	return nil
}
