package serialize_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

type ledger struct {
	Refunded []int `json:"refunded"`
}

type refund struct {
	OrderID int `json:"order_id"`
}

// newCharter builds the same charter in every process: nodes are code,
// only the machine is data.
func newCharter(model *scripted.Model) *machine.Charter {
	tool := node.NewTool("request_refund", "refund an order", func(ctx *node.ToolContext[ledger], in refund) (string, error) {
		return "", ctx.Suspend("needs approval", instance.WithMetadata(in))
	})
	support, err := node.New("support", node.Config[ledger]{Tools: []node.Tool[ledger]{tool}})
	if err != nil {
		panic(err)
	}
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{support}})
	if err != nil {
		panic(err)
	}
	return c
}

// A run suspends, the machine is persisted, and another charter — in
// another process, hours later — restores it and resumes the suspension.
func Example() {
	ctx := context.Background()
	c := newCharter(scripted.New(scripted.Tool("request_refund", refund{42})))
	m, _ := c.NewMachine("support", nil)
	var id string
	for step, err := range m.Run(ctx, machine.UserText("refund order 42")) {
		if err != nil {
			panic(err)
		}
		if step.Reason == machine.Suspend {
			id = step.Suspensions[0].SuspendID
		}
	}
	data, err := serialize.Marshal(m)
	if err != nil {
		panic(err)
	}

	// Later, maybe in another process:
	c2 := newCharter(scripted.New(scripted.Text("Order 42 is refunded.")))
	m2, err := serialize.Unmarshal(c2, data)
	if err != nil {
		panic(err)
	}
	for _, call := range m2.Pending() {
		fmt.Printf("pending: %s %s (%s)\n", call.Name, call.Input, call.Reason)
	}
	for step, err := range m2.Run(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"}) {
		if err != nil {
			panic(err)
		}
		for _, msg := range step.Messages {
			fmt.Printf("%s: %s\n", msg.Role, describe(msg))
		}
	}
	// Output:
	// pending: request_refund {"order_id":42} (needs approval)
	// assistant: calls request_refund
	// tool: result approved
	// assistant: Order 42 is refunded.
}

func describe(msg message.Message) string {
	var s []string
	for _, p := range msg.Parts {
		switch p.Kind {
		case message.KindText:
			s = append(s, p.Text)
		case message.KindToolUse:
			s = append(s, "calls "+p.Name)
		case message.KindToolResult:
			s = append(s, "result "+p.Text)
		}
	}
	return strings.Join(s, "; ")
}

// A state saved with a field its node's type has since renamed fails to
// load, naming the field, until the node declares a new state version and
// a migration from the older form.
func ExampleUnmarshal_stateVersion() {
	type cartV0 struct {
		Items []string `json:"items"`
	}
	type cart struct {
		Entries []string `json:"entries"` // was "items"
	}
	build := func(n *node.Node, err error) *machine.Charter {
		if err != nil {
			panic(err)
		}
		c, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{n}})
		if err != nil {
			panic(err)
		}
		return c
	}
	before := build(node.New("cart", node.Config[cartV0]{}))
	m, _ := before.NewMachine("cart", cartV0{Items: []string{"first"}})
	data, _ := serialize.Marshal(m)

	renamed := build(node.New("cart", node.Config[cart]{}))
	_, err := serialize.Unmarshal(renamed, data)
	var unknown *serialize.UnknownFieldsError
	if errors.As(err, &unknown) {
		fmt.Println("unknown fields:", unknown.Fields)
	}

	migrated := build(node.New("cart", node.Config[cart]{
		StateVersion: 1,
		Migrate: func(from int, raw json.RawMessage) (cart, error) {
			var old cartV0 // the only older version: 0
			err := json.Unmarshal(raw, &old)
			return cart{Entries: old.Items}, err
		},
	}))
	m, err = serialize.Unmarshal(migrated, data)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", m.Root().State)
	// Output:
	// unknown fields: [items]
	// {Entries:[first]}
}
