package command_test

import (
	"context"
	"fmt"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

type ticket struct {
	Priority string `json:"priority"`
}

func validTicket(t ticket) error {
	switch t.Priority {
	case "low", "normal", "urgent":
		return nil
	}
	return fmt.Errorf("unknown priority %q", t.Priority)
}

// deskMachine is a new machine at a "desk" node holding a normal-priority
// ticket, checked by validate (if not nil) and offering commands. Its
// model's script is empty: a model call would fail the run.
func deskMachine(validate func(ticket) error, commands ...command.Command[ticket]) *machine.Machine {
	desk, err := node.New("desk", node.Config[ticket]{
		Initial:  ticket{Priority: "normal"},
		Validate: validate,
		Commands: commands,
	})
	if err != nil {
		panic(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{desk}})
	if err != nil {
		panic(err)
	}
	m, err := charter.NewMachine("desk", nil)
	if err != nil {
		panic(err)
	}
	return m
}

func ExampleNew() {
	type priorityIn struct {
		Priority string `json:"priority" jsonschema:"low, normal or urgent"`
	}
	// A command is invoked by the caller, not the model: it runs without a
	// model call and its result comes back in the Command step.
	setPriority := command.New("set_priority", "Change the ticket's priority.",
		func(ctx *command.Context[ticket], in priorityIn) (string, error) {
			old := ctx.State().Priority
			if err := ctx.Update(func(t *ticket) { t.Priority = in.Priority }); err != nil {
				return "", err
			}
			return old + " -> " + in.Priority, nil
		})
	m := deskMachine(validTicket, setPriority)
	ctx := context.Background()
	for step, err := range m.Run(ctx, command.Invoke("set_priority", map[string]string{"priority": "urgent"})) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s %s: %v (done: %v)\n", step.Reason, step.Command.Name, step.Command.Value, step.Done)
	}
	fmt.Printf("state: %+v\n", m.Root().State)

	// A state that fails validation fails the command; the machine is
	// unchanged.
	for _, err := range m.Run(ctx, command.Invoke("set_priority", map[string]string{"priority": "whenever"})) {
		fmt.Println("error:", err)
	}
	fmt.Printf("state: %+v\n", m.Root().State)
	// Output:
	// command set_priority: normal -> urgent (done: true)
	// state: {Priority:urgent}
	// error: command set_priority: instance: invalid state: unknown priority "whenever"
	// state: {Priority:urgent}
}

func ExampleContext_Suspend() {
	type closeIn struct {
		Note string `json:"note"`
	}
	// A command may wait for someone else: it suspends, and the payload of
	// the ResumeInput becomes its result.
	closeTicket := command.New("close", "Close the ticket once QA signs off.",
		func(ctx *command.Context[ticket], in closeIn) (string, error) {
			return "", ctx.Suspend("waiting for QA sign-off: "+in.Note, instance.WithID("qa-sign-off-1"))
		})
	m := deskMachine(nil, closeTicket)
	ctx := context.Background()
	for step, err := range m.Run(ctx, command.Invoke("close", closeIn{Note: "fixed in 1.4.2"})) {
		if err != nil {
			panic(err)
		}
		s := step.Command.Suspension
		fmt.Printf("%s %s suspended as %s: %s\n", step.Reason, step.Command.Name, s.SuspendID, s.Reason)
	}
	for step, err := range m.Run(ctx, machine.ResumeInput{SuspendID: "qa-sign-off-1", Payload: "QA: verified"}) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s %s completed: %v\n", step.Reason, step.Command.Name, step.Command.Value)
	}
	// Output:
	// command close suspended as qa-sign-off-1: waiting for QA sign-off: fixed in 1.4.2
	// command close completed: QA: verified
}
