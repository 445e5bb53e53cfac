package durable_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
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
	run, err := runner.Resume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: "approved by dana"})
	if err != nil {
		panic(err) // refused: unknown, resolved, past its deadline, a bad payload
	}
	for step, err := range run.Steps() {
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

// A server accepts a manager's approval (the 202 of an HTTP resume) and
// is stopped before the model has answered: its run is cancelled, the
// approval already saved. The next process to start on the store
// continues that run with Recover, and the customer gets the answer.
func ExampleRunner_Recover() {
	ctx := context.Background()
	approve := node.NewTool("approve", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[struct{}], in Refund) (string, error) {
			return "", ctx.Suspend("refund of " + in.Order)
		})
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{approve}})
	if err != nil {
		panic(err)
	}
	newRunner := func(st *memstore.Store, model *scripted.Model) *durable.Runner {
		charter, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}})
		if err != nil {
			panic(err)
		}
		r, err := durable.New(durable.Config{Store: st, Charter: charter})
		if err != nil {
			panic(err)
		}
		return r
	}
	st := memstore.New()

	// The first process: the approval is accepted, then the process stops
	// while the model is still thinking.
	thinking := scripted.New(scripted.Tool("approve", Refund{Order: "A-42"}),
		scripted.Reply{Text: "Your refund is on its way.", Latency: time.Hour})
	first := newRunner(st, thinking)
	if _, err := first.Create(ctx, "order-42", "desk", nil); err != nil {
		panic(err)
	}
	var suspendID string
	for step, err := range first.Run(ctx, "order-42", machine.UserText("Please refund order A-42.")) {
		if err != nil {
			panic(err)
		}
		for _, call := range step.Suspensions {
			suspendID = call.SuspendID
		}
	}
	if _, err := first.AcceptResume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: "approved"}); err != nil {
		panic(err)
	}
	stopping, stop := context.WithCancel(ctx)
	stop()
	_ = first.Wait(stopping) // the shutdown cancels the run in progress

	// The next process.
	next := newRunner(st, scripted.New(scripted.Text("Your refund is on its way.")))
	n, err := next.Recover(ctx)
	if err != nil {
		panic(err)
	}
	status, err := next.Status(ctx, "order-42")
	if err != nil {
		panic(err)
	}
	fmt.Println("continued:", n)
	fmt.Println(status.State, "-", status.LastText)
	// Output:
	// continued: 1
	// done - Your refund is on its way.
}

// Resume checks a resume in before anything runs: a payload the
// suspension's declared type refuses is an error with a message for the
// person who sent it, and nothing changed. An accepted resume is a Run,
// whose events stream as it applies.
func ExampleRunner_Resume() {
	ctx := context.Background()
	type decision struct {
		Approved bool `json:"approved"`
	}
	approve := node.NewTool("approve", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[struct{}], in Refund) (string, error) {
			return "", ctx.Suspend("refund of " + in.Order)
		}, node.ResumeWith[decision]())
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{approve}})
	if err != nil {
		panic(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("approve", Refund{Order: "A-42", Amount: 30}), scripted.Text("Refunded.")),
		Nodes: []*node.Node{desk},
	})
	if err != nil {
		panic(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		panic(err)
	}
	if _, err := runner.Create(ctx, "order-42", "desk", nil); err != nil {
		panic(err)
	}
	var suspendID string
	for step, err := range runner.Run(ctx, "order-42", machine.UserText("Refund A-42.")) {
		if err != nil {
			panic(err)
		}
		for _, call := range step.Suspensions {
			suspendID = call.SuspendID
		}
	}

	_, err = runner.Resume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: map[string]any{"approved": "yes"}})
	var refused *instance.PayloadError
	if errors.As(err, &refused) {
		fmt.Println("refused:", refused.Message())
	}

	run, err := runner.Resume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: decision{Approved: true}})
	if err != nil {
		panic(err)
	}
	for e, err := range run.Events() {
		if err != nil {
			panic(err)
		}
		switch e.Kind {
		case machine.EventResumed:
			fmt.Println("resumed:", e.Lifecycle.Name)
		case machine.EventTextDelta:
			fmt.Print(e.Text)
		case machine.EventStep:
			fmt.Println("\nstep:", e.Step.Reason)
		}
	}
	// Output:
	// refused: payload: approved: expected boolean, got string
	// resumed: approve
	// Refunded.
	// step: end_turn
}
