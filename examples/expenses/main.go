// Command expenses runs the expense-approval assistant of package ledger
// the way a small service would, and shows every path of an approval:
//
//   - an expense filed and sent for approval; a malformed approval refused
//     over signed HTTP with a short message, the suspension kept; the
//     manager's approval over signed HTTP (a webhook client);
//   - a large expense escalated to the senior node, withdrawn by the
//     employee's command while it waits, and the way back — the ledger,
//     a pack, intact across both transitions;
//   - an expense nobody decides, expired 48 hours later by the sweeper;
//   - the machine's event log, read back with Watch: every change of the
//     ledger, as an approvals UI would see it.
//
// The machine lives in a SQLite file; each phase opens its own runner on
// it, as another process would. The model is scripted and the clock is
// the example's own (the sweep moves it 49 hours on), so it runs offline
// in a second:
//
//	go run ./examples/expenses
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/examples/expenses/ledger"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/sqlite"
)

// machineID is the employee's conversation.
const machineID = "alice"

// secret is the HMAC key the approval service shares with its webhook
// client (32 bytes, as resumehttp requires).
var secret = []byte("expenses-example-secret-32-bytes")

func main() {
	dir, err := os.MkdirTemp("", "markov-expenses-")
	if err == nil {
		defer os.RemoveAll(dir)
		_, err = run(context.Background(), os.Stdout, filepath.Join(dir, "expenses.db"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "expenses:", err)
		os.Exit(1)
	}
}

// clock is the example's settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// report is what a run saw, for the test to check.
type report struct {
	// Refused is the approval service's answer to the malformed approval.
	Refused resumehttp.ErrorBody
	// Status is its HTTP status.
	Status int
	// Answers are the assistant's final words after each phase.
	Answers []string
	// Nodes are the node the machine was at after each phase.
	Nodes []string
	// Ledger is the ledger at the end.
	Ledger ledger.Ledger
	// Changes are the ledger's states in the event log, in order.
	Changes []ledger.Ledger
}

// run plays the scenario on a SQLite file at path.
func run(ctx context.Context, w io.Writer, path string) (*report, error) {
	clk := &clock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	charter, err := ledger.NewCharter(ledger.Model(), clk.Now)
	if err != nil {
		return nil, err
	}
	// process opens a runner on the file, as a process of the service
	// would, runs fn with it and closes it.
	process := func(fn func(r *durable.Runner) error) error {
		s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			return err
		}
		defer s.Close()
		r, err := durable.New(durable.Config{Store: s, Charter: charter})
		if err != nil {
			return err
		}
		return fn(r)
	}
	rep := &report{}
	phase := func(title string, fn func(r *durable.Runner) error) error {
		fmt.Fprintf(w, "\n== %s\n", title)
		return process(func(r *durable.Runner) error {
			if err := fn(r); err != nil {
				return fmt.Errorf("%s: %w", title, err)
			}
			m, _, err := r.Load(ctx, machineID)
			if err != nil {
				return err
			}
			answer := lastAnswer(m)
			fmt.Fprintf(w, "assistant (%s): %s\n", m.Root().Node, answer)
			rep.Answers, rep.Nodes = append(rep.Answers, answer), append(rep.Nodes, m.Root().Node)
			return nil
		})
	}

	err = phase("a taxi, approved over signed HTTP", func(r *durable.Runner) error {
		if _, err := r.Create(ctx, machineID, ledger.Assistant, nil); err != nil {
			return err
		}
		id, err := say(ctx, w, r, "I spent $40 on a taxi to the client.")
		if err != nil {
			return err
		}
		srv, err := approvalService(r, clk.Now)
		if err != nil {
			return err
		}
		defer srv.Close()
		rep.Status, err = decide(srv.URL, id, clk.Now, map[string]any{"approved": "yes"}, &rep.Refused)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "webhook: %q → %d %s: %s\n", `{"approved": "yes"}`, rep.Status, rep.Refused.Code, rep.Refused.Error)
		status, err := decide(srv.URL, id, clk.Now, ledger.Approval{Approved: true, Manager: "bob"}, nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "webhook: bob approves → %d\n", status)
		return nil
	})
	if err == nil {
		err = phase("a server, escalated, then withdrawn by command", func(r *durable.Runner) error {
			id, err := say(ctx, w, r, "I spent $5000 on a server for the lab.")
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "employee: withdraw (%s pending)\n", id)
			run, err := r.Invoke(ctx, machineID, command.Invoke("withdraw", ledger.ApprovalInput{ExpenseID: "e2"}))
			if err != nil {
				return err
			}
			_, err = drain(run.Steps())
			return err
		})
	}
	if err == nil {
		err = phase("a lunch nobody decides, expired by the sweeper", func(r *durable.Runner) error {
			if _, err := say(ctx, w, r, "I spent $30 on a lunch with the team."); err != nil {
				return err
			}
			clk.advance(ledger.ApprovalTimeout + time.Hour)
			n, err := r.Sweep(ctx, 0)
			fmt.Fprintf(w, "(49 hours later) the sweeper expired %d suspension(s)\n", n)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	err = process(func(r *durable.Runner) error {
		m, _, err := r.Load(ctx, machineID)
		if err != nil {
			return err
		}
		rep.Ledger = m.Root().Packs[ledger.Pack].(ledger.Ledger)
		rep.Changes, err = ledgerChanges(ctx, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "\n== the ledger, and its changes in the event log\n")
	for _, e := range rep.Ledger.Expenses {
		fmt.Fprintf(w, "%s %-7s $%7.2f %-9s %s\n", e.ID, e.Item, e.Amount, e.Status, e.DecidedBy)
	}
	fmt.Fprintf(w, "%d ledger changes logged\n", len(rep.Changes))
	return rep, nil
}

// say sends the employee's message and returns the approval it waits for.
func say(ctx context.Context, w io.Writer, r *durable.Runner, text string) (string, error) {
	fmt.Fprintf(w, "employee: %s\n", text)
	steps, err := drain(r.Run(ctx, machineID, machine.UserText(text)))
	if err != nil {
		return "", err
	}
	last := steps[len(steps)-1]
	if !last.NeedsResume() {
		return "", errors.New("the assistant asked for no approval")
	}
	c := last.Suspensions[0]
	fmt.Fprintf(w, "waiting: %s (%s)\n", c.Reason, c.SuspendID)
	return c.SuspendID, nil
}

// approvalService serves resumehttp's endpoints over r, as the approval
// service would, on the clock now.
func approvalService(r *durable.Runner, now func() time.Time) (*httptest.Server, error) {
	h, err := resumehttp.New(resumehttp.Config{Runner: r, Secret: secret, Clock: now})
	if err != nil {
		return nil, err
	}
	return httptest.NewServer(h), nil
}

// decide is the webhook client: it signs and sends a manager's decision
// at now, and returns the answer's status (its error body in refused, if
// set).
func decide(base, suspendID string, now func() time.Time, payload any, refused *resumehttp.ErrorBody) (int, error) {
	body, err := json.Marshal(resumehttp.ResumeRequest{Payload: mustJSON(payload)})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/suspensions/"+suspendID+"/resume", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resumehttp.SignRequest(secret, req, body, now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if refused != nil {
		err = json.NewDecoder(resp.Body).Decode(refused)
	}
	return resp.StatusCode, err
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// ledgerChanges reads the machine's event log from its start and returns
// the ledger's state at each change.
func ledgerChanges(ctx context.Context, r *durable.Runner) ([]ledger.Ledger, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := r.Status(ctx, machineID)
	if err != nil {
		return nil, err
	}
	var out []ledger.Ledger
	for e, err := range r.Watch(ctx, machineID, 0) {
		if err != nil {
			return nil, err
		}
		if e.Kind == machine.EventStateChanged && e.Pack == ledger.Pack {
			raw, err := json.Marshal(e.State)
			if err != nil {
				return nil, err
			}
			var l ledger.Ledger
			if err := json.Unmarshal(raw, &l); err != nil {
				return nil, err
			}
			out = append(out, l)
		}
		if e.Seq >= st.EventSeq {
			break
		}
	}
	return out, nil
}

// lastAnswer is the assistant's last text.
func lastAnswer(m *machine.Machine) string {
	h := m.History()
	for i := len(h) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(h[i].Text()); t != "" && h[i].Role == message.Assistant {
			return t
		}
	}
	return ""
}

// drain runs a sequence of steps to its end.
func drain(seq func(func(machine.Step, error) bool)) ([]machine.Step, error) {
	var steps []machine.Step
	for s, err := range seq {
		if err != nil {
			return steps, err
		}
		steps = append(steps, s)
	}
	return steps, nil
}
