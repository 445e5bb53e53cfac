package machine_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

// A payment needs two of three managers, and the person who asked for it
// may not approve it. Each decision names the digest of the call it saw.
func ExampleResumeInput_governed() {
	// governed:tool:begin
	type Transfer struct {
		Amount int    `json:"amount"`
		To     string `json:"to"`
	}
	pay := node.NewTool("pay", "Pay an amount; two managers approve it.",
		func(ctx *node.ToolContext[struct{}], in Transfer) (string, error) {
			return "", ctx.Suspend("payment needs two managers",
				instance.WithPolicy(instance.Policy{
					Subjects:       []string{"ana", "bo", "cy"},
					Quorum:         2,    // two distinct approvers
					SeparateDuties: true, // the requester may not decide
					Delegations:    []instance.Delegation{{From: "cy", To: "dan"}},
				}))
		})
	// governed:tool:end
	till, _ := node.New("till", node.Config[struct{}]{Tools: []node.Tool[struct{}]{pay}})
	charter, _ := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("pay", Transfer{Amount: 900, To: "ACME"}), scripted.Text("Paid.")),
		Nodes: []*node.Node{till},
	})
	m, _ := charter.NewMachine("till", nil)

	// governed:decide:begin
	// The run goes on behalf of ana: she is the requester.
	ctx := instance.WithIdentity(context.Background(), instance.Identity{Subject: "ana"})
	for _, err := range m.Run(ctx, machine.UserText("pay ACME 900")) {
		if err != nil {
			panic(err)
		}
	}
	call := m.Pending()[0]
	decide := func(by string) error {
		for _, err := range m.Run(context.Background(), machine.ResumeInput{
			SuspendID: call.SuspendID, Payload: "approved by " + by, By: by, Digest: call.Digest,
		}) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	err := decide("ana")
	fmt.Println("ana:", errors.Is(err, instance.ErrSeparationOfDuties))
	fmt.Println("bo:", decide("bo"), "- decisions so far:", len(m.Pending()[0].Decisions))
	fmt.Println("dan for cy:", decide("dan"), "- pending:", len(m.Pending()))
	for _, d := range m.TakeDecisions() {
		fmt.Println(d.Outcome, "by", d.Decision.Principal())
	}
	// governed:decide:end

	// Output:
	// ana: true
	// bo: <nil> - decisions so far: 1
	// dan for cy: <nil> - pending: 0
	// recorded by bo
	// approved by cy
}
