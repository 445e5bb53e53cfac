package durable_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/standing"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// Small refunds are approved by a standing rule, twice at most: the
// first never reaches a person, the third waits for one.
func ExampleConfig_rules() {
	type Refund struct {
		Amount int `json:"amount"`
	}
	refund := node.NewTool("refund", "Refund an amount; a person approves it.",
		func(ctx *node.ToolContext[struct{}], in Refund) (string, error) {
			return "", ctx.Suspend("refunds need a person")
		})
	desk, _ := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{refund}})
	charter, _ := machine.NewCharter(machine.CharterConfig{Name: "shop", Nodes: []*node.Node{desk}, Model: scripted.New(
		scripted.Tool("refund", Refund{Amount: 20}), scripted.Text("refunded"),
		scripted.Tool("refund", Refund{Amount: 900}),
	)})
	// standing:rules:begin
	rules, err := standing.Load(strings.NewReader(`[{
		"id": "small-refunds", "tool": "refund",
		"cel": "input.amount <= 50",
		"scope": {"charter": "shop"},
		"expires": "2099-01-01T00:00:00Z", "max_uses": 2,
		"payload": "approved"
	}]`))
	if err != nil {
		panic(err) // a rule that does not compile: standing: rule ID: field: why
	}
	s := memstore.New()
	runner, _ := durable.New(durable.Config{Store: s, Charter: charter, Rules: rules})
	// standing:rules:end
	ctx := context.Background()
	if _, err := runner.Create(ctx, "m", "desk", nil); err != nil {
		panic(err)
	}
	for _, text := range []string{"refund my 20", "and my 900"} {
		for step, err := range runner.Run(ctx, "m", machine.UserText(text)) {
			if err != nil {
				panic(err)
			}
			if step.Done {
				fmt.Printf("%q: waits for a person: %v\n", text, step.NeedsResume())
			}
		}
	}
	used, _ := s.RuleUsed(ctx, "small-refunds")
	inbox, _ := runner.Pending(ctx, store.Filter{Status: store.StatusPending})
	fmt.Println("uses:", used, "- in the inbox:", len(inbox))
	// Output:
	// "refund my 20": waits for a person: false
	// "and my 900": waits for a person: true
	// uses: 1 - in the inbox: 1
}
