package durabletest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/durable/durabletest"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

type desk struct{}

type payIn struct {
	Amount int `json:"amount"`
}

type receipt struct {
	ID string `json:"id"`
}

// deskCharter is a desk with two tools acting on a world kept in
// dir/world.log, one line per effect: pay charges through a journaled
// effect whose key goes to the "bank" (the line), so its reconcile hook
// can tell; mail, the planted bug, writes its line outside any effect.
// The model pays, mails, then answers.
func deskCharter(dir string) (*machine.Charter, error) {
	world := filepath.Join(dir, "world.log")
	write := func(line string) error {
		f, err := os.OpenFile(world, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintln(f, line)
		return err
	}
	// The bank: was the charge of key made?
	reconcile := func(_ context.Context, key string) (receipt, bool, error) {
		data, err := os.ReadFile(world)
		if err != nil && !os.IsNotExist(err) {
			return receipt{}, false, err
		}
		found := strings.Contains(string(data), "charge "+key+" ")
		return receipt{ID: "r-40"}, found, nil
	}
	pay := node.NewTool("pay", "charge a card", func(ctx *node.ToolContext[desk], in payIn) (receipt, error) {
		return node.Effect(ctx, "charge", func(context.Context) (receipt, error) {
			return receipt{ID: fmt.Sprint("r-", in.Amount)}, write(fmt.Sprintf("charge %s/charge %d", ctx.IdempotencyKey(), in.Amount))
		}, node.EffectConfig[receipt]{Input: in, Reconcile: reconcile})
	})
	mail := node.NewTool("mail", "mail the receipt", func(ctx *node.ToolContext[desk], in receipt) (string, error) {
		return "sent", write("mail " + in.ID)
	})
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{pay, mail}})
	if err != nil {
		return nil, err
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role != message.Tool:
			return scripted.Reply{Calls: []scripted.Call{{ID: fmt.Sprint("pay", len(req.Messages)), Name: "pay", Input: payIn{Amount: 40}}}}, nil
		case strings.Contains(last.Parts[0].Text, "r-40") && strings.Contains(os.Getenv("DURABLETEST_MAIL"), "on"):
			return scripted.Reply{Calls: []scripted.Call{{ID: fmt.Sprint("mail", len(req.Messages)), Name: "mail", Input: receipt{ID: "r-40"}}}}, nil
		}
		return scripted.Text("done: " + last.Parts[0].Text), nil
	})
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
}

// worldCounts counts the world's lines by their first word.
func worldCounts(env durabletest.Env) (map[string]int, error) {
	data, err := os.ReadFile(filepath.Join(env.Dir, "world.log"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	out := map[string]int{}
	for line := range strings.Lines(string(data)) {
		out[strings.Fields(line)[0]]++
	}
	return out, nil
}

// stores are the stores a child and its parent share: SQLite, and
// PostgreSQL when MARKOV_TEST_POSTGRES is set.
var stores = map[string]func(t testing.TB, env durabletest.Env) store.Store{
	"sqlite":   durabletest.SQLite,
	"postgres": postgresStore,
}

// postgresStore opens the schema env.Name of the test database, dropped
// when the parent's test ends (a child exits before its cleanups run).
func postgresStore(t testing.TB, env durabletest.Env) store.Store {
	url := pgtest.URL(t)
	schema := "durabletest_" + env.Name
	pgtest.DropAtEnd(t, url, schema)
	return pgtest.OpenIn(t, url, schema)
}

// scenario is the desk's conversation on the stores open makes.
func scenario(open func(t testing.TB, env durabletest.Env) store.Store) durabletest.Scenario {
	// effects:crashkit:begin
	return durabletest.Scenario{
		Charter:  func(env durabletest.Env) (*machine.Charter, error) { return deskCharter(env.Dir) },
		Store:    open, // durabletest.SQLite, or a PostgreSQL schema named after env.Name
		Root:     "desk",
		Messages: []string{"pay 40", "and again"},
		World:    worldCounts, // the effects as the outside world counts them, by name
	}
	// effects:crashkit:end
}

// A journaled charge with a reconcile hook survives a SIGKILL at every
// crash point: charged once per message, the transcript as uncrashed.
func TestJournaledEffectIsResumeSafe(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			rep := durabletest.Run(t, scenario(open))
			kinds := map[durabletest.PointKind]int{}
			for _, p := range rep.Points {
				kinds[p.Kind]++
			}
			if kinds[durabletest.EffectStarted] != 2 || kinds[durabletest.BeforeSave] < 6 || kinds[durabletest.AfterSave] != kinds[durabletest.BeforeSave] {
				t.Fatalf("crash points tried: %v", rep.Points)
			}
		})
	}
}

// The planted bug: mail writes its effect outside the journal, and a
// crash after it and before its round's save mails twice. The kit finds
// it.
func TestFindsEffectOutsideTheJournal(t *testing.T) {
	t.Setenv("DURABLETEST_MAIL", "on")
	sc := scenario(durabletest.SQLite)
	sc.Messages = sc.Messages[:1]
	rep, err := durabletest.Check(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		if strings.Contains(p.What, "effect mail ran 2 times, 1 in the uncrashed run") {
			found = true
		}
		if strings.Contains(p.What, "effect charge") {
			t.Errorf("the journaled charge reported: %v", p)
		}
	}
	if !found {
		t.Fatalf("the double mail is not reported: %v", rep.Problems)
	}
}

// bookCharter is a desk whose tool "book" books a seat through a tx
// effect, a row in the table bookings of the store's own database: a
// SQLite file, or with schema set a PostgreSQL schema. The model books
// once per message, then answers.
func bookCharter(schema string) (*machine.Charter, error) {
	table := bookingsTable(schema)
	create := `CREATE TABLE IF NOT EXISTS ` + table + ` (seat integer NOT NULL)`
	book := node.NewTool("book", "book a seat", func(ctx *node.ToolContext[desk], in struct{}) (int, error) {
		if schema == "" {
			return node.EffectTx(ctx, "book", func(ctx context.Context, tx *sql.Tx) (int, error) {
				var rows int
				_, err := tx.ExecContext(ctx, create+`; INSERT INTO bookings (seat) VALUES (7)`)
				if err == nil {
					err = tx.QueryRowContext(ctx, `SELECT count(*) FROM bookings`).Scan(&rows)
				}
				return rows, err
			})
		}
		return node.EffectTx(ctx, "book", func(ctx context.Context, tx pgx.Tx) (int, error) {
			var rows int
			_, err := tx.Exec(ctx, create)
			if err == nil {
				_, err = tx.Exec(ctx, `INSERT INTO `+table+` (seat) VALUES (7)`)
			}
			if err == nil {
				err = tx.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&rows)
			}
			return rows, err
		})
	})
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{book}})
	if err != nil {
		return nil, err
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
			return scripted.Text("rows: " + last.Parts[0].Text), nil
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: fmt.Sprint("book", len(req.Messages)), Name: "book", Input: struct{}{}}}}, nil
	})
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
}

// bookingsTable is the table's name in SQL.
func bookingsTable(schema string) string {
	if schema == "" {
		return "bookings"
	}
	return pgx.Identifier{schema, "bookings"}.Sanitize()
}

// A tx effect survives a SIGKILL at every crash point — inside its
// transaction, and at each save around it — booking once per message, on
// SQLite and PostgreSQL: the world is the table's rows.
func TestTxEffectIsResumeSafe(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			schema := func(env durabletest.Env) string {
				if name == "sqlite" {
					return ""
				}
				return "durabletest_" + env.Name
			}
			rep := durabletest.Run(t, durabletest.Scenario{
				Charter:  func(env durabletest.Env) (*machine.Charter, error) { return bookCharter(schema(env)) },
				Store:    open,
				Root:     "desk",
				Messages: []string{"book", "book again"},
				World: func(env durabletest.Env) (map[string]int, error) {
					rows, err := countBookings(t, env, schema(env))
					return map[string]int{"book": rows}, err
				},
			})
			kinds := map[durabletest.PointKind]int{}
			for _, p := range rep.Points {
				kinds[p.Kind]++
			}
			if kinds[durabletest.EffectTx] != 2 || kinds[durabletest.EffectStarted] != 0 {
				t.Fatalf("crash points tried: %v", rep.Points)
			}
		})
	}
}

// countBookings counts the rows of the bookings table of env's store (0
// before the first booking made it).
func countBookings(t *testing.T, env durabletest.Env, schema string) (int, error) {
	var rows int
	if schema == "" {
		db, err := sql.Open("sqlite", filepath.Join(env.Dir, "store.db"))
		if err != nil {
			return 0, err
		}
		defer db.Close()
		err = db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'bookings'`).Scan(&rows)
		if err == nil && rows == 1 {
			err = db.QueryRow(`SELECT count(*) FROM bookings`).Scan(&rows)
		}
		return rows, err
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT coalesce((SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'bookings'), 0)`, schema).Scan(&rows)
	if err == nil && rows == 1 {
		err = conn.QueryRow(ctx, `SELECT count(*) FROM `+bookingsTable(schema)).Scan(&rows)
	}
	return rows, err
}
