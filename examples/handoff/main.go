// Command handoff shows a charter of two nodes: a front desk that a user
// configures with a command, which takes notes in a pack and hands the
// conversation to billing with a code transition that carries what
// billing needs.
//
// A transition replaces the instance's node and its state: billing starts
// from the state the transition gives it, and the desk's state and
// commands are gone. What must outlive the transition travels in the
// transition's target state, or lives in a pack (the notes here), whose
// state sits on the root instance and is shared by every node that opts
// into the pack.
//
//	go run ./examples/handoff
//
// The model is scripted, so it runs offline.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// handoff:types:begin

// Desk is the front desk's state.
type Desk struct {
	Customer string `json:"customer"`
}

// Billing is billing's state: what the desk hands over.
type Billing struct {
	Customer string `json:"customer"`
	Summary  string `json:"summary"`
}

// Notes is the notes pack's state, one for the whole machine.
type Notes struct {
	Lines []string `json:"lines"`
}

// handoff:types:end

// NewCharter returns the charter: the desk (the root's first node) and
// billing, both with the notes pack.
func NewCharter(model llm.Model) (*machine.Charter, error) {
	// handoff:pack:begin
	type note struct {
		Text string `json:"text"`
	}
	notes := node.NewPack("notes", "Notes that every node of the conversation shares.", Notes{},
		node.NewPackTool("add_note", "Write down a fact about the customer's case.",
			func(ctx *node.PackContext[Notes], in note) (string, error) {
				return "noted", ctx.Update(func(n *Notes) { n.Lines = append(n.Lines, in.Text) })
			}))
	// handoff:pack:end

	// handoff:command:begin
	type customer struct {
		Name string `json:"name"`
	}
	// A command: invoked by the caller (a UI, an API), never by the model.
	setCustomer := command.New("set_customer", "Set who the customer is.",
		func(ctx *command.Context[Desk], in customer) (string, error) {
			return "customer " + in.Name, ctx.Update(func(d *Desk) { d.Customer = in.Name })
		})
	// handoff:command:end

	// handoff:transition:begin
	type handover struct {
		Summary string `json:"summary" jsonschema:"the customer's problem in a sentence"`
	}
	// A code transition: the model calls it like a tool; it builds
	// billing's state from the desk's, since the desk's state is replaced.
	toBilling := node.NewTransition("to_billing", "Hand an invoice or payment question to billing.",
		func(ctx *node.TransitionContext[Desk], in handover) (instance.Effect, error) {
			return instance.Goto("billing", Billing{Customer: ctx.State().Customer, Summary: in.Summary}), nil
		}, node.Targets("billing"))
	// handoff:transition:end

	// handoff:nodes:begin
	desk, err := node.New("desk", node.Config[Desk]{
		Instructions: "Find out what the customer needs; note the facts.",
		Transitions:  []node.Transition[Desk]{toBilling},
		Commands:     []command.Command[Desk]{setCustomer},
		Packs:        []*node.Pack{notes},
	})
	if err != nil {
		return nil, err
	}
	billing, err := node.New("billing", node.Config[Billing]{
		Instructions: "Answer invoice and payment questions.",
		Packs:        []*node.Pack{notes},
	})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{desk, billing}})
	// handoff:nodes:end
}

// ScriptedModel plays both nodes: the desk notes the problem and hands
// over; billing answers. Its reply follows from the request alone (the
// node, the desk's last message), so a machine resumed by another process
// gets the reply that follows, where a queue would start over.
func ScriptedModel() *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		switch last := req.Messages[len(req.Messages)-1]; {
		case req.Node == "billing":
			return scripted.Text("Billing here: I refunded the second charge of invoice 7."), nil
		case last.Role == message.Tool:
			return scripted.Tool("to_billing", map[string]string{"summary": "charged twice for invoice 7"}), nil
		}
		return scripted.Tool("add_note", map[string]string{"text": "invoice 7 charged twice"}), nil
	})
}

func main() {
	if err := Run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(1)
	}
}

// Run sets the customer with a command, runs the user's question through
// the desk to billing and writes what happens to w.
func Run(ctx context.Context, w io.Writer) error {
	charter, err := NewCharter(ScriptedModel())
	if err != nil {
		return err
	}
	m, err := charter.NewMachine("desk", nil)
	if err != nil {
		return err
	}
	// handoff:run:begin
	for step, err := range m.Run(ctx, command.Invoke("set_customer", map[string]string{"name": "ada"})) {
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "command %s: %v\n", step.Command.Name, step.Command.Value)
	}
	for step, err := range m.Run(ctx, machine.UserText("I was charged twice.")) {
		if err != nil {
			return err
		}
		for _, msg := range step.Messages {
			if msg.Role == message.Assistant && msg.Text() != "" {
				fmt.Fprintf(w, "%s: %s\n", msg.Source.Node, msg.Text())
			}
		}
	}
	root := m.Root()
	fmt.Fprintf(w, "now at %s with %+v\n", root.Node, root.State)
	// handoff:run:end
	notes, _ := root.Packs["notes"].(Notes)
	fmt.Fprintf(w, "notes: %s\n", strings.Join(notes.Lines, "; "))
	return nil
}
