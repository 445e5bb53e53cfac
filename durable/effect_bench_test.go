package durable

import (
	"context"
	"fmt"
	"testing"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// BenchmarkEffect times a durable run whose one tool call makes one
// external effect (a no-op charge), journaled (node.Effect) or not:
// create, the model's tool call, the tool, the final answer, every save.
// The difference is the journal's cost: two writes (started, then done).
func BenchmarkEffect(b *testing.B) {
	type payIn struct {
		Amount int `json:"amount"`
	}
	type receipt struct {
		ID string `json:"id"`
	}
	type desk struct{}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if req.Messages[len(req.Messages)-1].Role == message.Tool {
			return scripted.Text("paid"), nil
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: "t1", Name: "pay", Input: payIn{Amount: 40}}}}, nil
	})
	charge := func(context.Context) (receipt, error) { return receipt{ID: "r"}, nil }
	for name, open := range benchStores(b) {
		for _, journaled := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/journaled=%v", name, journaled), func(b *testing.B) {
				pay := node.NewTool("pay", "charge a card", func(ctx *node.ToolContext[desk], in payIn) (receipt, error) {
					if !journaled {
						return charge(ctx)
					}
					return node.Effect(ctx, "charge", charge, node.EffectConfig[receipt]{Input: in})
				})
				n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{pay}})
				if err != nil {
					b.Fatal(err)
				}
				c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
				if err != nil {
					b.Fatal(err)
				}
				r, err := New(Config{Store: open(), Charter: c})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					id := fmt.Sprint("m", i)
					if _, err := r.Create(ctx, id, "desk", nil); err != nil {
						b.Fatal(err)
					}
					for _, err := range r.Run(ctx, id, machine.UserText("pay 40")) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
