// Command approval is a demo of suspend and resume: a support agent
// handles a refund request, its request_refund tool parks the call until a
// manager decides, and the run resumes with the manager's Approval. The
// charter lives in package refund, shared with the markov CLI.
//
// It runs offline on a scripted model, and on a real one when
// ANTHROPIC_API_KEY or OPENAI_API_KEY is set (see refund.ModelFromEnv).
//
// In production the machine would be persisted (serialize.Marshal) while it
// waits, and the decision would arrive hours later, in another process,
// through a webhook (resumehttp) or a durable store — `go run ./cmd/markov
// demo` does exactly that, with SQLite and a second process. Here both
// halves run in one process so the flow is easy to follow.
//
//	go run ./examples/approval
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	model, desc, err := refund.ModelFromEnv()
	if err == nil {
		fmt.Printf("model: %s\n\n", desc)
		err = run(ctx, os.Stdout, model)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "approval:", err)
		os.Exit(1)
	}
}

// run plays the whole flow on model: the request, the suspension, the
// manager's decision and the final answer.
func run(ctx context.Context, w io.Writer, model llm.Model) error {
	charter, err := refund.NewCharter(model)
	if err != nil {
		return err
	}
	m, err := charter.NewMachine(refund.NodeName, nil)
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "customer: %s\n", refund.CustomerRequest)
	pending, err := drive(ctx, w, m, machine.UserText(refund.CustomerRequest))
	if err != nil {
		return err
	}
	if len(pending) != 1 {
		return fmt.Errorf("want one pending call, have %d", len(pending))
	}
	call := pending[0]
	if err := printPending(w, call); err != nil {
		return err
	}

	// Here the machine would be saved and the suspend ID sent to a manager.
	// A payload that is not an Approval is refused; the call stays pending.
	bad := json.RawMessage(`{"approved":"yes"}`)
	fmt.Fprintf(w, "\nmanager sends: %s\n", bad)
	_, err = drive(ctx, w, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: bad})
	if !errors.Is(err, instance.ErrPayloadDecode) {
		return fmt.Errorf("want the payload refused, got %v", err)
	}
	fmt.Fprintf(w, "refused, %d call still pending: %v\n", len(m.Pending()), err)

	decision := refund.Approval{Approved: true, Manager: "dana@example.com"}
	fmt.Fprintf(w, "\nmanager decides: %+v\n", decision)
	if _, err := drive(ctx, w, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: decision}); err != nil {
		return err
	}
	ledger, _ := m.Root().State.(refund.Ledger)
	fmt.Fprintf(w, "\nledger: refunded %v\n", ledger.Refunded)
	return nil
}

// drive runs m with inputs, prints every step and returns the calls still
// pending when the run ends.
func drive(ctx context.Context, w io.Writer, m *machine.Machine, inputs ...machine.Input) ([]instance.SuspendedCall, error) {
	var pending []instance.SuspendedCall
	for step, err := range m.Run(ctx, inputs...) {
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "[step: %s, done: %v]\n", step.Reason, step.Done)
		for _, msg := range step.Messages {
			printMessage(w, msg)
		}
		pending = step.Suspensions
	}
	return pending, nil
}

func printMessage(w io.Writer, msg message.Message) {
	for _, p := range msg.Parts {
		switch p.Kind {
		case message.KindText:
			fmt.Fprintf(w, "%s: %s\n", msg.Role, p.Text)
		case message.KindToolUse:
			fmt.Fprintf(w, "%s calls %s %s\n", msg.Role, p.Name, p.Data)
		case message.KindToolResult:
			status := "result"
			if p.IsError {
				status = "error"
			}
			fmt.Fprintf(w, "tool %s: %s\n", status, p.Text)
		}
	}
}

// printPending shows a suspended call the way an approval queue would.
func printPending(w io.Writer, c instance.SuspendedCall) error {
	meta, err := instance.Decode[refund.RefundMeta](c.Metadata)
	if err != nil {
		return err
	}
	onTimeout := "the call fails"
	if c.OnTimeout.Resume {
		onTimeout = "the call resumes with " + string(c.OnTimeout.Payload)
	}
	fmt.Fprintf(w, "\npending call\n")
	fmt.Fprintf(w, "  suspend ID: %s\n", c.SuspendID)
	fmt.Fprintf(w, "  tool:       %s\n", c.Name)
	fmt.Fprintf(w, "  input:      %s\n", c.Input)
	fmt.Fprintf(w, "  reason:     %s\n", c.Reason)
	fmt.Fprintf(w, "  metadata:   order %s, $%.2f\n", meta.OrderID, meta.Amount)
	fmt.Fprintf(w, "  payload:    %s\n", c.PayloadSchema)
	fmt.Fprintf(w, "  deadline:   %s (%s after suspension); then %s\n",
		c.Deadline.Format(time.RFC3339), c.Deadline.Sub(c.SuspendedAt), onTimeout)
	return nil
}
