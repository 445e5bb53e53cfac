package durable_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/memstore"
)

// refundAfterOutage is a runner whose model is down for the call after
// the approval (its second), with a machine suspended for the approval;
// it returns the runner, the machine and the suspend ID.
func refundAfterOutage(retry durable.Retry) (*durable.Runner, string, string) {
	ctx := context.Background()
	var calls atomic.Int32
	model := scripted.Func(func(*llm.Request) (scripted.Reply, error) {
		switch calls.Add(1) {
		case 1:
			return scripted.Tool("approve", Refund{Order: "A-42", Amount: 30}), nil
		case 2:
			return scripted.Reply{}, errors.New("model endpoint refused the connection")
		}
		return scripted.Text("Your refund is on its way."), nil
	})
	approve := node.NewTool("approve", "Ask a manager to approve a refund.",
		func(ctx *node.ToolContext[struct{}], in Refund) (string, error) {
			return "", ctx.Suspend("refund of " + in.Order)
		})
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{approve}})
	if err != nil {
		panic(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}})
	if err != nil {
		panic(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter, Retry: retry})
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
		for _, call := range step.Suspensions {
			suspendID = call.SuspendID
		}
	}
	return runner, id, suspendID
}

// A decision is accepted while the model is down: the run after it
// fails, and the runner tries it again with backoff until it ends.
func ExampleRetry() {
	ctx := context.Background()
	runner, id, suspendID := refundAfterOutage(durable.Retry{Attempts: 3, Backoff: time.Millisecond})
	a, err := runner.AcceptResume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: "approved"})
	if err != nil {
		panic(err)
	}
	_, err = runner.Await(ctx, a)
	fmt.Println("first run failed:", err != nil)
	if err := runner.Wait(ctx); err != nil { // the retries included
		panic(err)
	}
	st, err := runner.Status(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.State, "—", st.LastText)
	// Output:
	// first run failed: true
	// done — Your refund is on its way.
}

// Without retries, the machine whose run failed waits, idle, until an
// operator continues it.
func ExampleRunner_AcceptContinue() {
	ctx := context.Background()
	runner, id, suspendID := refundAfterOutage(durable.Retry{})
	a, err := runner.AcceptResume(ctx, machine.ResumeInput{SuspendID: suspendID, Payload: "approved"})
	if err != nil {
		panic(err)
	}
	_, _ = runner.Await(ctx, a) // the model is down
	st, err := runner.Status(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.State)

	a, err = runner.AcceptContinue(ctx, id)
	if err != nil {
		panic(err)
	}
	if _, err := runner.Await(ctx, a); err != nil {
		panic(err)
	}
	st, err = runner.Status(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.State, "—", st.LastText)
	// Output:
	// idle
	// done — Your refund is on its way.
}
