package node_test

import (
	"context"
	"fmt"

	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

func ExampleNewTool() {
	// The input type is the tool's JSON Schema: `json` tags name the
	// fields, `jsonschema` tags describe them, omitempty makes them
	// optional. Every input is validated before the handler runs.
	type lookupIn struct {
		OrderID string `json:"order_id" jsonschema:"the order to look up"`
		Verbose bool   `json:"verbose,omitempty"`
	}
	// A non-string result is sent to the model as JSON.
	type order struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	type clerkState struct {
		Lookups int `json:"lookups"`
	}
	lookup := node.NewTool("lookup_order", "Look up an order by ID.",
		func(ctx *node.ToolContext[clerkState], in lookupIn) (order, error) {
			// Update validates the new state; the next tool of the same
			// reply sees it.
			if err := ctx.Update(func(s *clerkState) { s.Lookups++ }); err != nil {
				return order{}, err
			}
			return order{ID: in.OrderID, Status: "shipped"}, nil
		})
	clerk, err := node.New("clerk", node.Config[clerkState]{
		Instructions: "Answer questions about orders.",
		Tools:        []node.Tool[clerkState]{lookup},
	})
	if err != nil {
		panic(err)
	}
	for _, t := range clerk.Tools() {
		fmt.Printf("%s: %s\n", t.Spec.Name, t.Spec.InputSchema)
	}

	charter, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(
			scripted.Tool("lookup_order", map[string]any{"order_id": "A-42"}),
			scripted.Text("Order A-42 has shipped."),
		),
		Nodes: []*node.Node{clerk},
	})
	if err != nil {
		panic(err)
	}
	m, err := charter.NewMachine("clerk", nil)
	if err != nil {
		panic(err)
	}
	for step, err := range m.Run(context.Background(), machine.UserText("Where is A-42?")) {
		if err != nil {
			panic(err)
		}
		for _, msg := range step.Messages {
			for _, p := range msg.Parts {
				if p.Kind == message.KindToolResult {
					fmt.Println("result:", p.Text)
				}
			}
		}
	}
	fmt.Printf("state: %+v\n", m.Root().State)
	// Output:
	// lookup_order: {"type":"object","properties":{"order_id":{"type":"string","description":"the order to look up"},"verbose":{"type":"boolean"}},"required":["order_id"],"additionalProperties":false}
	// result: {"id":"A-42","status":"shipped"}
	// state: {Lookups:1}
}

func ExampleTo() {
	// Transitions name their target node as a string, resolved when the
	// charter is built. node.To("billing", …) is shown to the model as
	// the tool transition_to_billing.
	triage, err := node.New("triage", node.Config[struct{}]{
		Instructions: "Find out what the customer needs.",
		Transitions: []node.Transition[struct{}]{
			node.To[struct{}]("billing", "The question is about an invoice or a payment."),
		},
	})
	if err != nil {
		panic(err)
	}
	billing, err := node.New("billing", node.Config[struct{}]{
		Instructions: "Answer billing questions.",
	})
	if err != nil {
		panic(err)
	}
	for _, t := range triage.Tools() {
		fmt.Println("triage tool:", t.Spec.Name)
	}

	charter, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(
			scripted.Tool("transition_to_billing", nil),
			scripted.Text("Billing here: your invoice is attached."),
		),
		Nodes: []*node.Node{triage, billing},
	})
	if err != nil {
		panic(err)
	}
	m, err := charter.NewMachine("triage", nil)
	if err != nil {
		panic(err)
	}
	for step, err := range m.Run(context.Background(), machine.UserText("Where is my invoice?")) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: now at node %s\n", step.Reason, step.Root.Node)
		for _, msg := range step.Messages {
			if msg.Role == message.Assistant && msg.Text() != "" {
				fmt.Printf("  %s says: %s\n", msg.Source.Node, msg.Text())
			}
		}
	}
	// Output:
	// triage tool: transition_to_billing
	// tool_use: now at node billing
	// end_turn: now at node billing
	//   billing says: Billing here: your invoice is attached.
}
