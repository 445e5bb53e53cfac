// Package tour is the README's short tour as a program. The README shows
// the region "tour" of this file (the lines between its "tour:begin" and
// "tour:end" comments, in order); docs/first-agent.md shows the regions
// nested in it. The package's test runs the tour and checks that the
// README still shows exactly those lines; internal/doccheck's test checks
// the guide.
package tour

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

// tour:begin
// tour:types:begin

type ledger struct {
	Refunded []string `json:"refunded"`
}
type refund struct {
	OrderID string `json:"order_id"`
}
type approval struct {
	OK bool `json:"ok"`
}

// tour:types:end
// tour:end

// NewCharter returns the tour's charter around model: one node, support,
// with one tool, request_refund, that suspends until a manager decides.
func NewCharter(model llm.Model) *machine.Charter {
	// tour:begin
	// tour:tool:begin

	// A tool with typed input (JSON Schema inferred, input validated) that
	// suspends until a manager decides — with an approval: a resume payload
	// that is not one is refused, and the suspension stays pending.
	requestRefund := node.NewTool("request_refund", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[ledger], in refund) (string, error) {
			return "", ctx.Suspend("needs approval",
				instance.WithMetadata(in), instance.WithTimeout(48*time.Hour))
		}, node.ResumeWith[approval]())
	// tour:tool:end

	// tour:charter:begin
	support, _ := node.New("support", node.Config[ledger]{
		Instructions: "Help customers. Refunds need a manager's approval.",
		Tools:        []node.Tool[ledger]{requestRefund},
	})
	charter, _ := machine.NewCharter(machine.CharterConfig{
		Model: model, // llm/anthropic, llm/openai, or llm/scripted
		Nodes: []*node.Node{support},
	})
	// tour:charter:end
	// tour:end
	return charter
}

// Park runs a customer's refund request on a new machine of charter until
// it suspends, and hands the machine's bytes and pending calls to save.
func Park(ctx context.Context, charter *machine.Charter, save func([]byte, []instance.SuspendedCall) error) error {
	// tour:begin
	// tour:run:begin
	m, _ := charter.NewMachine("support", nil)

	for step, err := range m.Run(ctx, machine.UserText("refund order 42")) {
		if err != nil {
			return err
		}
		if step.Reason == machine.Suspend {
			data, _ := serialize.Marshal(m) // park it anywhere
			return save(data, step.Suspensions)
		}
	}
	// tour:run:end
	// tour:end
	return nil
}

// Resume restores the machine parked as data, resumes its suspension id
// with an approval, and writes the text of each message the run adds to w.
func Resume(ctx context.Context, charter *machine.Charter, data []byte, id string, w io.Writer) error {
	// tour:begin
	// tour:resume:begin

	// …hours later, maybe in another process:
	m, err := serialize.Unmarshal(charter, data)
	if err != nil {
		return err
	}
	for step, err := range m.Run(ctx, machine.ResumeInput{SuspendID: id, Payload: approval{OK: true}}) {
		if err != nil {
			return err
		}
		for _, msg := range step.Messages {
			fmt.Fprintln(w, msg.Text())
		}
	}
	// tour:resume:end
	// tour:end
	return nil
}
