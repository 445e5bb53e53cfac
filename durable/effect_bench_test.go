package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// BenchmarkEffect times a durable run whose one tool call makes one
// external effect (a no-op charge), journaled (node.Effect) or not:
// create, the model's tool call, the tool, the final answer, every save.
// The difference is the journal's cost: two writes (started, then done).
func BenchmarkEffect(b *testing.B) {
	stores := map[string]func() store.Store{
		"memstore": func() store.Store { return memstore.New() },
		"sqlite": func() store.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db")})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
	if os.Getenv(pgtest.EnvVar) != "" {
		stores["postgres"] = func() store.Store {
			s, _, _ := pgtest.Open(b)
			return s
		}
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if req.Messages[len(req.Messages)-1].Role == message.Tool {
			return scripted.Text("paid"), nil
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: "t1", Name: "pay", Input: payIn{Amount: 40}}}}, nil
	})
	charge := func(context.Context) (receipt, error) { return receipt{ID: "r"}, nil }
	for name, open := range stores {
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
				r, err := durable.New(durable.Config{Store: open(), Charter: c})
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
					if _, err := drain(r.Run(ctx, id, machine.UserText("pay 40"))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
