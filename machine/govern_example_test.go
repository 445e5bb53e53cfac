package machine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// An approver lowers a payment before approving it: the tool's resume
// handler pays what the edited input says, and the model is told who
// changed it.
func ExampleResumeInput_edit() {
	// edit:tool:begin
	type Transfer struct {
		Amount int    `json:"amount"`
		To     string `json:"to"`
	}
	pay := node.NewTool("pay", "Pay an amount; a manager approves it.",
		func(ctx *node.ToolContext[struct{}], in Transfer) (string, error) {
			return "", ctx.Suspend("payment needs a manager",
				instance.WithPolicy(instance.Policy{Subjects: []string{"bo"}, AllowEdit: true}))
		},
		// The handler runs with the input as approved: edited, if it was.
		node.OnResume(func(ctx *node.ToolContext[struct{}], in Transfer, r node.Resumed[string]) (string, error) {
			return fmt.Sprintf("paid %d to %s", in.Amount, in.To), nil
		}))
	// edit:tool:end
	desk, _ := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{pay}})
	charter, _ := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("pay", Transfer{Amount: 900, To: "acme"}), scripted.Text("Done.")),
		Nodes: []*node.Node{desk},
	})
	m, _ := charter.NewMachine("desk", nil)
	for _, err := range m.Run(context.Background(), machine.UserText("pay ACME 900")) {
		if err != nil {
			panic(err)
		}
	}
	call := m.Pending()[0]
	// edit:decide:begin
	decide := func(edit any) error {
		for _, err := range m.Run(context.Background(), machine.ResumeInput{
			SuspendID: call.SuspendID, Payload: "ok", By: "bo", Digest: call.Digest, Edit: edit,
		}) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	var bad *instance.InputError
	err := decide(map[string]any{"amount": "less", "to": "acme"})
	fmt.Println(errors.As(err, &bad), bad.Field, "- pending:", len(m.Pending()))
	fmt.Println(decide(Transfer{Amount: 500, To: "acme"}))
	// edit:decide:end
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.SuspendID == call.SuspendID && p.Text != "" {
				fmt.Println(p.Text)
			}
		}
	}
	// Output:
	// true amount - pending: 1
	// <nil>
	// [bo edited the input before approving; the call ran with {"amount":500,"to":"acme"}]
	// paid 500 to acme
}

// At its deadline an unanswered payment is re-asked of the directors for
// a day, and then denied: never a silent continue.
func ExampleResumeInput_escalation() {
	clock := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	// escalate:tool:begin
	pay := node.NewTool("pay", "Pay an amount.",
		func(ctx *node.ToolContext[struct{}], in struct{ Amount int }) (string, error) {
			return "", ctx.Suspend("payment needs a manager",
				instance.WithPolicy(instance.Policy{
					Groups: []string{"managers"},
					Escalation: &instance.Escalation{
						Policy:  instance.Policy{Groups: []string{"directors"}},
						Timeout: 24 * time.Hour, // the directors' deadline
					},
				}),
				instance.WithTimeout(4*time.Hour),                 // the managers' deadline
				instance.OnTimeoutDeny("nobody approved in time")) // after both
		})
	// escalate:tool:end
	desk, _ := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{pay}})
	charter, _ := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("pay", map[string]int{"Amount": 900}), scripted.Text("Not paid.")),
		Nodes: []*node.Node{desk},
		Clock: func() time.Time { return clock },
	})
	m, _ := charter.NewMachine("desk", nil)
	run := func() {
		for _, err := range m.Run(context.Background()) {
			if err != nil {
				panic(err)
			}
		}
	}
	for _, err := range m.Run(context.Background(), machine.UserText("pay 900")) {
		if err != nil {
			panic(err)
		}
	}
	clock = clock.Add(4 * time.Hour)
	run()
	c := m.Pending()[0]
	fmt.Println(c.Policy.Groups, c.Deadline.Format(time.RFC3339))
	clock = clock.Add(24 * time.Hour)
	run()
	for _, d := range m.TakeDecisions() {
		fmt.Println(d.Outcome)
	}
	// Output:
	// [directors] 2026-05-05T13:00:00Z
	// escalated
	// denied
}

// An unanswered payment reminds the managers every hour before its
// four-hour deadline — a "reminded" event each time, the call still
// pending and its deadline unchanged — and an approval after the
// reminders settles it.
func ExampleResumeInput_remind() {
	clock := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	// remind:tool:begin
	pay := node.NewTool("pay", "Pay an amount.",
		func(ctx *node.ToolContext[struct{}], in struct{ Amount int }) (string, error) {
			return "", ctx.Suspend("payment needs a manager",
				instance.WithPolicy(instance.Policy{
					Groups: []string{"managers"},
					Remind: time.Hour, // at 10:00, 11:00 and 12:00
				}),
				instance.WithTimeout(4*time.Hour), // 13:00
				instance.OnTimeoutDeny("nobody approved in time"))
		})
	// remind:tool:end
	desk, _ := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{pay}})
	charter, _ := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("pay", map[string]int{"Amount": 900}), scripted.Text("Paid.")),
		Nodes: []*node.Node{desk},
		Clock: func() time.Time { return clock },
	})
	m, _ := charter.NewMachine("desk", nil)
	run := func(inputs ...machine.Input) {
		for _, err := range m.Run(context.Background(), inputs...) {
			if err != nil {
				panic(err)
			}
		}
	}
	run(machine.UserText("pay 900"))
	for range 2 {
		clock = clock.Add(time.Hour)
		events, _ := m.Expire(clock) // what a sweeper does
		c := m.Pending()[0]
		fmt.Println(events[0].Type, "- next", c.RemindAt.Format(time.Kitchen), "deadline", c.Deadline.Format(time.Kitchen))
	}
	clock = clock.Add(30 * time.Minute)
	c := m.Pending()[0]
	run(machine.ResumeInput{SuspendID: c.SuspendID, Payload: "ok", By: "bo", Groups: []string{"managers"}, Digest: c.Digest})
	for _, d := range m.TakeDecisions() {
		fmt.Printf("%s by %q\n", d.Outcome, d.Decision.By)
	}
	// Output:
	// reminded - next 11:00AM deadline 1:00PM
	// reminded - next 12:00PM deadline 1:00PM
	// reminded by ""
	// reminded by ""
	// approved by "bo"
}
