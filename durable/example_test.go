package durable_test

import (
	"context"
	"fmt"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/memstore"
)

// Refund is the input of the example's approve tool.
type Refund struct {
	Order  string  `json:"order"`
	Amount float64 `json:"amount"`
}

// A machine is created in a store, run until its approve tool suspends for
// a manager, and resumed later by the suspend ID alone: Resume finds the
// machine in the store, loads it, applies the payload as the tool's result
// and runs the model again. Every step is saved before it is yielded, so
// the resume may come from another process sharing the store.
func Example() {
	ctx := context.Background()

	// The approve tool waits for a human: it suspends, and the payload that
	// resumes it becomes its result.
	approve := node.NewTool("approve", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[struct{}], in Refund) (string, error) {
			return "", ctx.Suspend(fmt.Sprintf("refund of $%.2f for %s", in.Amount, in.Order))
		})
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{approve}})
	if err != nil {
		panic(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{
		Name: "refunds",
		Model: scripted.New(
			scripted.Tool("approve", Refund{Order: "A-42", Amount: 30}),
			scripted.Text("Your refund is on its way."),
		),
		Nodes: []*node.Node{desk},
	})
	if err != nil {
		panic(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		panic(err)
	}

	id, err := runner.Create(ctx, "order-42", "desk", nil)
	if err != nil {
		panic(err)
	}
	var suspendID string
	for step, err := range runner.Run(ctx, id, machine.UserText("Please refund order A-42.")) {
		if err != nil {
			panic(err)
		}
		fmt.Println("step:", step.Reason)
		for _, call := range step.Suspensions {
			fmt.Println("waiting:", call.Name, call.Reason)
			suspendID = call.SuspendID
		}
	}

	// Later, in any process sharing the store: the suspend ID is enough.
	sp, err := runner.Suspension(ctx, suspendID)
	if err != nil {
		panic(err)
	}
	fmt.Println("held by:", sp.MachineID, sp.Status)
	for step, err := range runner.Resume(ctx, suspendID, "approved by dana", false) {
		if err != nil {
			panic(err)
		}
		for _, msg := range step.Messages {
			if msg.Role == message.Assistant && msg.Text() != "" {
				fmt.Println("assistant:", msg.Text())
			}
		}
	}
	// Output:
	// step: suspend
	// waiting: approve refund of $30.00 for A-42
	// held by: order-42 pending
	// assistant: Your refund is on its way.
}
