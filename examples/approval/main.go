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

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/steptext"
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
	m, err := refund.NewMachine(model)
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
	var refused *instance.PayloadError
	if !errors.As(err, &refused) {
		return fmt.Errorf("want the payload refused, got %v", err)
	}
	// Message is the text for the manager: short, naming the field.
	fmt.Fprintf(w, "refused, %d call still pending: %s\n", len(m.Pending()), refused.Message())

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
	last, err := steptext.WriteAll(w, m.Run(ctx, inputs...))
	if err != nil {
		return nil, err
	}
	return last.Suspensions, nil
}

// printPending shows a suspended call the way an approval queue would,
// with the metadata the refund tool attached, decoded.
func printPending(w io.Writer, c instance.SuspendedCall) error {
	meta, err := instance.Decode[refund.RefundMeta](c.Metadata)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := steptext.WriteCall(w, c); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "  the manager sees: order %s, $%.2f\n", meta.OrderID, meta.Amount)
	return err
}
