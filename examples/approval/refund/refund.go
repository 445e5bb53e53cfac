// Package refund is the charter of the approval demo, shared by the
// approval example, the markov CLI and the provider tests: a support agent
// whose request_refund tool suspends until a manager sends an Approval.
//
// NewCharter builds it on any llm.Model; ScriptedModel plays the model's
// part offline and deterministically; ModelFromEnv picks a real provider
// when an API key is set.
package refund

import (
	"fmt"
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
// refund. The tool declares it (node.ResumeWith), so its JSON Schema is on
// every suspended refund for an approval form to render, and a payload
// that is not an Approval ({"approved":"yes"}) is refused before the
// suspension is consumed.
type Approval struct {
	Approved bool   `json:"approved" jsonschema:"true to issue the refund, false to decline it"`
	Manager  string `json:"manager" jsonschema:"who decided"`
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

// Names of the charter.
const (
	// CharterName is the charter's name.
	CharterName = "refunds"
	// NodeName is the node the agent runs in: start machines there.
	NodeName = "support"
	// ToolName is the tool that suspends until a manager decides.
	ToolName = "request_refund"
)

// CustomerRequest is what the customer writes in the demo.
const CustomerRequest = "Hi, the blender from order A-1042 arrived broken. Can I get my $89.90 back?"

// NewMachine is a new machine of NewCharter(model) at NodeName with an
// empty Ledger.
func NewMachine(model llm.Model) (*machine.Machine, error) {
	charter, err := NewCharter(model)
	if err != nil {
		return nil, err
	}
	return charter.NewMachine(NodeName, nil)
}

// NewCharter returns the refund charter, answered by model: one support
// node whose request_refund tool suspends until a manager's Approval
// resumes it (any other payload but an error is refused). A refund
// approved is added to the Ledger; a declined one is reported to the
// model; an order already refunded fails without suspending.
func NewCharter(model llm.Model) (*machine.Charter, error) {
	requestRefund := node.NewTool(ToolName,
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
		node.OnResume(func(ctx *node.ToolContext[Ledger], in RefundRequest, r node.Resumed[Approval]) (string, error) {
			a := r.Payload
			if !a.Approved {
				return fmt.Sprintf("%s declined the refund for order %s", a.Manager, in.OrderID), nil
			}
			if err := ctx.Update(func(l *Ledger) { l.Refunded = append(l.Refunded, in.OrderID) }); err != nil {
				return "", err
			}
			return fmt.Sprintf("refund of $%.2f for order %s issued, approved by %s", in.Amount, in.OrderID, a.Manager), nil
		}),
	)
	support, err := node.New(NodeName, node.Config[Ledger]{
		Instructions: "Help customers with their orders. Refunds need a manager's approval: request them with request_refund.",
		Tools:        []node.Tool[Ledger]{requestRefund},
	})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{
		Name:         CharterName,
		Instructions: "You are the support agent of an online shop. Be brief and friendly.",
		Model:        model,
		Nodes:        []*node.Node{support},
		// A long conversation sends the model its last 200 messages, and
		// a durable run loads only the end of the history those need.
		Window: 200,
	})
}

// ScriptedModel returns a deterministic model that plays the LLM's part
// of the demo: it requests the refund of order A-1042, then answers from
// the tool result. It keeps none of the requests it answers, so a
// long-running server on it does not grow.
func ScriptedModel() llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != message.Tool {
			return scripted.Reply{
				Text: "I'm sorry about the blender. I'll ask a manager to approve the refund.",
				Calls: []scripted.Call{{Name: ToolName, Input: RefundRequest{
					OrderID: "A-1042", Amount: 89.90, Reason: "arrived broken",
				}}},
			}, nil
		}
		result := last.Parts[0]
		if result.IsError {
			return scripted.Text("Sorry, I couldn't get your refund approved: " + result.Text + ". I've passed it on to a human colleague."), nil
		}
		return scripted.Text("Update on your refund: " + result.Text + "."), nil
	}).Configure(scripted.Config{KeepRequests: -1})
}
