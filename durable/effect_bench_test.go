package durable

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// benchDesk is the state of the effect benchmarks' desk.
type benchDesk struct{}

// benchOneTool times runs of machines of a desk with tool, whose model
// calls it once with in and then answers, on s: create, the model's tool
// call, the tool, the final answer, every save.
func benchOneTool(b *testing.B, s store.Store, tool node.Tool[benchDesk], in any) {
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if req.Messages[len(req.Messages)-1].Role == message.Tool {
			return scripted.Text("done"), nil
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: "t1", Name: tool.Name(), Input: in}}}, nil
	})
	n, err := node.New("desk", node.Config[benchDesk]{Tools: []node.Tool[benchDesk]{tool}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{Store: s, Charter: c})
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
		for _, err := range r.Run(ctx, id, machine.UserText("go")) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkEffect times a durable run whose one tool call makes one
// external effect (a no-op charge), journaled (node.Effect) or not
// (benchOneTool). The difference is the journal's cost: one write (its
// start; its done rides on the round's save).
func BenchmarkEffect(b *testing.B) {
	type payIn struct {
		Amount int `json:"amount"`
	}
	type receipt struct {
		ID string `json:"id"`
	}
	charge := func(context.Context) (receipt, error) { return receipt{ID: "r"}, nil }
	for name, open := range benchStores(b) {
		for _, journaled := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/journaled=%v", name, journaled), func(b *testing.B) {
				pay := node.NewTool("pay", "charge a card", func(ctx *node.ToolContext[benchDesk], in payIn) (receipt, error) {
					if !journaled {
						return charge(ctx)
					}
					return node.Effect(ctx, "charge", charge, node.EffectConfig[receipt]{Input: in})
				})
				benchOneTool(b, open(), pay, payIn{Amount: 40})
			})
		}
	}
}

// BenchmarkEffectTx times the run of BenchmarkEffect whose effect books a
// seat — a row inserted in a table of the store's own database — as a
// journaled effect (node.Effect, inserting through a connection of its
// own: the journal's start, the insert's commit, its done riding on the
// round's save) or as a tx effect (node.EffectTx: the insert and its
// done entry in one transaction of the store).
func BenchmarkEffectTx(b *testing.B) {
	type bookIn struct {
		Seat int `json:"seat"`
	}
	// A back end: its store, and the tool's effect in either form.
	type backend struct {
		open func() store.Store
		// plain inserts through a connection of its own; tx through the
		// store's transaction.
		plain func(ctx *node.ToolContext[benchDesk], seat int) (int, error)
		tx    func(ctx *node.ToolContext[benchDesk], seat int) (int, error)
	}
	backends := map[string]func() backend{
		"sqlite": func() backend {
			path := filepath.Join(b.TempDir(), "bench.db")
			s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			if _, err := db.Exec(`CREATE TABLE bookings (seat integer NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			const insert = `INSERT INTO bookings (seat) VALUES (?)`
			return backend{
				open: func() store.Store { return s },
				plain: func(ctx *node.ToolContext[benchDesk], seat int) (int, error) {
					return node.Effect(ctx, "book", func(ctx context.Context) (int, error) {
						_, err := db.ExecContext(ctx, insert, seat)
						return seat, err
					}, node.EffectConfig[int]{Input: seat})
				},
				tx: func(ctx *node.ToolContext[benchDesk], seat int) (int, error) {
					return node.EffectTx(ctx, "book", func(ctx context.Context, tx *sql.Tx) (int, error) {
						_, err := tx.ExecContext(ctx, insert, seat)
						return seat, err
					})
				},
			}
		},
		"postgres": func() backend {
			s, url, schema := pgtest.Open(b)
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			table := pgx.Identifier{schema, "bookings"}.Sanitize()
			if _, err := pool.Exec(context.Background(), `CREATE TABLE `+table+` (seat integer NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			insert := `INSERT INTO ` + table + ` (seat) VALUES ($1)`
			return backend{
				open: func() store.Store { return s },
				plain: func(ctx *node.ToolContext[benchDesk], seat int) (int, error) {
					return node.Effect(ctx, "book", func(ctx context.Context) (int, error) {
						_, err := pool.Exec(ctx, insert, seat)
						return seat, err
					}, node.EffectConfig[int]{Input: seat})
				},
				tx: func(ctx *node.ToolContext[benchDesk], seat int) (int, error) {
					return node.EffectTx(ctx, "book", func(ctx context.Context, tx pgx.Tx) (int, error) {
						_, err := tx.Exec(ctx, insert, seat)
						return seat, err
					})
				},
			}
		},
	}
	for name, newBackend := range backends {
		if name == "postgres" && os.Getenv(pgtest.EnvVar) == "" {
			continue
		}
		for _, kind := range []string{"journaled", "tx"} {
			b.Run(name+"/"+kind, func(b *testing.B) {
				be := newBackend()
				effect := be.plain
				if kind == "tx" {
					effect = be.tx
				}
				book := node.NewTool("book", "book a seat", func(ctx *node.ToolContext[benchDesk], in bookIn) (int, error) {
					return effect(ctx, in.Seat)
				})
				benchOneTool(b, be.open(), book, bookIn{Seat: 7})
			})
		}
	}
}
