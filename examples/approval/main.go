// Command approval is an offline demo of suspend and resume: a support
// agent handles a refund request, its request_refund tool parks the call
// until a manager decides, and the run resumes with the manager's Approval.
//
// In production the machine would be persisted (serialize.Marshal) while it
// waits, and the decision would arrive hours later, in another process,
// through a webhook (resumehttp) or a durable store. Here both halves run
// in one process so the flow is easy to follow.
//
//	go run ./examples/approval
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// Approval is a manager's decision: the payload that resumes a suspended
// refund.
type Approval struct {
	Approved bool   `json:"approved"`
	Manager  string `json:"manager"`
}

// RefundRequest is the input of the request_refund tool.
type RefundRequest struct {
	OrderID string  `json:"order_id" jsonschema:"the order to refund"`
	Amount  float64 `json:"amount" jsonschema:"the amount to refund, in dollars"`
	Reason  string  `json:"reason" jsonschema:"why the customer asks for a refund"`
}

// RefundMeta is the metadata of a suspended refund: what the manager needs
// to decide, without parsing the tool input.
type RefundMeta struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

// Ledger is the support node's state: the orders refunded so far.
type Ledger struct {
	Refunded []string `json:"refunded"`
}

// ApprovalTimeout is how long a refund waits for a manager. When it
// passes, the call fails and the agent tells the customer.
const ApprovalTimeout = 48 * time.Hour

// supportNode is the node the agent runs in.
const supportNode = "support"

// customerRequest is what the customer writes in the demo.
const customerRequest = "Hi, the blender from order A-1042 arrived broken. Can I get my $89.90 back?"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "approval:", err)
		os.Exit(1)
	}
}

// run plays the whole flow: the request, the suspension, the manager's
// decision and the final answer.
func run(ctx context.Context, w io.Writer) error {
	charter, err := newCharter(model())
	if err != nil {
		return err
	}
	m, err := charter.NewMachine(supportNode, nil)
	if err != nil {
		return err
	}

	fmt.Fprintf(w, "customer: %s\n", customerRequest)
	pending, err := drive(ctx, w, m, machine.UserText(customerRequest))
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
	decision := Approval{Approved: true, Manager: "dana@example.com"}
	fmt.Fprintf(w, "\nmanager decides: %+v\n", decision)
	if _, err := drive(ctx, w, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: decision}); err != nil {
		return err
	}
	ledger, _ := m.Root().State.(Ledger)
	fmt.Fprintf(w, "\nledger: refunded %v\n", ledger.Refunded)
	return nil
}

// newCharter returns the refund charter, answered by model: one support
// node whose request_refund tool waits for a manager's Approval. Other
// programs (a CLI demo, provider tests) reuse it with their own model.
func newCharter(model llm.Model) (*machine.Charter, error) {
	requestRefund := node.NewTool("request_refund",
		"Ask a manager to approve a refund. The call returns once the manager has decided.",
		func(ctx *node.ToolContext[Ledger], in RefundRequest) (string, error) {
			if slices.Contains(ctx.State().Refunded, in.OrderID) {
				return "", fmt.Errorf("order %s was already refunded", in.OrderID)
			}
			// No on-timeout option: when the deadline passes, the call
			// fails with an error result the model sees.
			return "", ctx.Suspend(
				fmt.Sprintf("refund of $%.2f for order %s needs a manager's approval", in.Amount, in.OrderID),
				instance.WithMetadata(RefundMeta{OrderID: in.OrderID, Amount: in.Amount}),
				instance.WithTimeout(ApprovalTimeout),
			)
		},
		node.OnResume(func(ctx *node.ToolContext[Ledger], in RefundRequest, r instance.Resolution) (string, error) {
			a, err := instance.Decode[Approval](r.Payload)
			if err != nil {
				return "", err
			}
			if !a.Approved {
				return fmt.Sprintf("%s declined the refund for order %s", a.Manager, in.OrderID), nil
			}
			if err := ctx.Update(func(l *Ledger) { l.Refunded = append(l.Refunded, in.OrderID) }); err != nil {
				return "", err
			}
			return fmt.Sprintf("refund of $%.2f for order %s issued, approved by %s", in.Amount, in.OrderID, a.Manager), nil
		}),
	)
	support, err := node.New(supportNode, node.Config[Ledger]{
		Instructions: "Help customers with their orders. Refunds need a manager's approval: request them with request_refund.",
		Tools:        []node.Tool[Ledger]{requestRefund},
		NoStateTool:  true,
	})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{
		Name:         "refunds",
		Instructions: "You are the support agent of an online shop. Be brief and friendly.",
		Model:        model,
		Nodes:        []*node.Node{support},
	})
}

// model returns the model the demo runs on. This is the seam for real
// providers: a later change returns an Anthropic or OpenAI model when
// ANTHROPIC_API_KEY or OPENAI_API_KEY is set. For now the demo is offline.
func model() llm.Model { return scriptedModel() }

// scriptedModel plays the LLM's part: it requests the refund, then answers
// from the tool result.
func scriptedModel() llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != message.Tool {
			return scripted.Reply{
				Text: "I'm sorry about the blender. I'll ask a manager to approve the refund.",
				Calls: []scripted.Call{{Name: "request_refund", Input: RefundRequest{
					OrderID: "A-1042", Amount: 89.90, Reason: "arrived broken",
				}}},
			}, nil
		}
		result := last.Parts[0]
		if result.IsError {
			return scripted.Text("Sorry, I couldn't get your refund approved: " + result.Text + ". I've passed it on to a human colleague."), nil
		}
		return scripted.Text("Update on your refund: " + result.Text + "."), nil
	})
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
	meta, err := instance.Decode[RefundMeta](c.Metadata)
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
	fmt.Fprintf(w, "  deadline:   %s (%s after suspension); then %s\n",
		c.Deadline.Format(time.RFC3339), c.Deadline.Sub(c.SuspendedAt), onTimeout)
	return nil
}
