package durable_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

type bookIn struct {
	Seat int `json:"seat"`
}

type booking struct {
	Seat int `json:"seat"`
	// Rows is how many bookings the table held once this one was made.
	Rows int `json:"rows"`
}

// bookings is the user's table of bookings, in the store's own database:
// a SQLite file (path) or a PostgreSQL schema.
type bookings struct {
	path, url, schema string
}

// bookingsOf is the table in the store a child process is told of by env
// (processStores).
func bookingsOf(env []string) bookings {
	var b bookings
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "MARKOV_DB":
			b.path = v
		case "MARKOV_PG_SCHEMA":
			b.url, b.schema = os.Getenv(pgtest.EnvVar), v
		}
	}
	return b
}

// table is the table's name in SQL.
func (b bookings) table() string {
	if b.schema == "" {
		return "bookings"
	}
	return pgx.Identifier{b.schema, "bookings"}.Sanitize()
}

// db runs fn on the table's database, outside the store: with the
// *sql.DB of the SQLite file, or a *pgx.Conn.
func (b bookings) db(t *testing.T, fn func(ctx context.Context, exec func(q string) error, query func(q string, dest ...any) error)) {
	t.Helper()
	ctx := context.Background()
	if b.schema == "" {
		db, err := sql.Open("sqlite", b.path)
		require.NoError(t, err)
		defer db.Close()
		fn(ctx, func(q string) error { _, err := db.ExecContext(ctx, q); return err },
			func(q string, dest ...any) error { return db.QueryRowContext(ctx, q).Scan(dest...) })
		return
	}
	conn, err := pgx.Connect(ctx, b.url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	fn(ctx, func(q string) error { _, err := conn.Exec(ctx, q); return err },
		func(q string, dest ...any) error { return conn.QueryRow(ctx, q).Scan(dest...) })
}

// create makes the table.
func (b bookings) create(t *testing.T) {
	b.db(t, func(_ context.Context, exec func(string) error, _ func(string, ...any) error) {
		require.NoError(t, exec(`CREATE TABLE `+b.table()+` (seat integer NOT NULL)`))
	})
}

// rows counts the bookings made.
func (b bookings) rows(t *testing.T) int {
	var n int
	b.db(t, func(_ context.Context, _ func(string) error, query func(string, ...any) error) {
		require.NoError(t, query(`SELECT count(*) FROM `+b.table(), &n))
	})
	return n
}

// insert is the statement that books a seat, its parameter in the
// database's syntax.
func (b bookings) insert() string {
	if b.schema == "" {
		return `INSERT INTO bookings (seat) VALUES (?)`
	}
	return `INSERT INTO ` + b.table() + ` (seat) VALUES ($1)`
}

// txCharter is a desk whose tool "book" books seat 7 through a tx effect
// (node.EffectTx) on the table b: it inserts a row, counts the rows, and
// calls hang("in") before its transaction commits; once the effect
// returned, the tool calls hang("after") (before the round's save).
func txCharter(b bookings, hang func(where string)) (*machine.Charter, error) {
	insert := b.insert()
	count := `SELECT count(*) FROM ` + b.table()
	bookTool := node.NewTool("book", "book a seat", func(ctx *node.ToolContext[desk], in bookIn) (booking, error) {
		var out booking
		var err error
		if b.schema == "" {
			out, err = node.EffectTx(ctx, "book", func(ctx context.Context, tx *sql.Tx) (booking, error) {
				if _, err := tx.ExecContext(ctx, insert, in.Seat); err != nil {
					return booking{}, err
				}
				out := booking{Seat: in.Seat}
				err := tx.QueryRowContext(ctx, count).Scan(&out.Rows)
				hang("in")
				return out, err
			})
		} else {
			out, err = node.EffectTx(ctx, "book", func(ctx context.Context, tx pgx.Tx) (booking, error) {
				if _, err := tx.Exec(ctx, insert, in.Seat); err != nil {
					return booking{}, err
				}
				out := booking{Seat: in.Seat}
				err := tx.QueryRow(ctx, count).Scan(&out.Rows)
				hang("in")
				return out, err
			})
		}
		if err == nil {
			hang("after")
		}
		return out, err
	})
	return oneToolCharter(bookTool, "book", bookIn{Seat: 7})
}

// oneToolCharter is a desk with tool, whose model calls it once with in
// and then answers "result: " and its result.
func oneToolCharter(tool node.Tool[desk], name string, in any) (*machine.Charter, error) {
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{tool}})
	if err != nil {
		return nil, err
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
			return scripted.Text("result: " + last.Parts[0].Text), nil
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: "t1", Name: name, Input: in}}}, nil
	})
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
}

// childEffectTx runs machine m1 of the tx charter until the booking
// reaches MARKOV_EFFECT_HANG ("in": inside the transaction, its row
// inserted and not committed; "after": committed with its journal entry,
// before the round's save), says so and waits there for its SIGKILL.
func childEffectTx() int {
	b := bookings{path: os.Getenv("MARKOV_DB"), url: os.Getenv(pgtest.EnvVar), schema: os.Getenv("MARKOV_PG_SCHEMA")}
	return childHanging(func(hang func(string)) (*machine.Charter, error) { return txCharter(b, hang) }, "book seat 7")
}

// A process is SIGKILLed inside a tx effect's transaction, before it
// commits: its row is not there, nor its journal entry, and the next
// process books once. A process SIGKILLed after the commit, before the
// round's save: the row and the done entry are there, and the next
// process gets the journaled result without booking again. On SQLite and
// PostgreSQL; the table's rows count the bookings.
func TestEffectTxCrash(t *testing.T) {
	processStores(t, func(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
		for _, tc := range []struct {
			where       string
			rowsAtCrash int
			reruns      int32
		}{
			{"in", 0, 1},
			{"after", 1, 0},
		} {
			t.Run(tc.where, func(t *testing.T) {
				s, env := open(t)
				b := bookingsOf(env)
				b.create(t)
				child := testkit.ChildCommand(append(env, "MARKOV_CHILD=effecttx", "MARKOV_EFFECT_HANG="+tc.where)...)
				require.NoError(t, testkit.StartChild(child, tc.where))
				require.NoError(t, child.Process.Kill())
				require.Error(t, child.Wait())
				require.Equal(t, tc.rowsAtCrash, b.rows(t), "rows when the process died")

				var runs atomic.Int32
				c, err := txCharter(b, func(where string) {
					if where == "in" {
						runs.Add(1)
					}
				})
				require.NoError(t, err)
				r, err := durable.New(durable.Config{Store: s, Charter: c})
				require.NoError(t, err)
				require.Equal(t, `result: {"seat":7,"rows":1}`, finalText(t, r))
				require.Equal(t, tc.reruns, runs.Load(), "runs of the effect after the crash")
				require.Equal(t, 1, b.rows(t), "bookings made")
			})
		}
	})
}

// runTool runs machine m1 of a desk whose one tool runs body, on store s,
// and returns its runner and final answer.
func runTool(t *testing.T, s store.Store, body func(ctx *node.ToolContext[desk]) (string, error)) (*durable.Runner, string) {
	t.Helper()
	tool := node.NewTool("do", "do it", func(ctx *node.ToolContext[desk], _ struct{}) (string, error) { return body(ctx) })
	c, err := oneToolCharter(tool, "do", struct{}{})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c})
	require.NoError(t, err)
	_, err = r.Create(context.Background(), "m1", "desk", nil)
	require.NoError(t, err)
	return r, finalText(t, r, machine.UserText("go"))
}

// An error or a panic of a tx effect's function rolls back its writes and
// journals nothing: the effect runs again when the call does. A second
// effect of one name in one call is refused, and so is a function that
// takes another transaction type than the store's; nothing runs.
func TestEffectTxErrors(t *testing.T) {
	processStores(t, func(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
		s, env := open(t)
		b := bookingsOf(env)
		b.create(t)
		insert := b.insert()
		// book inserts a row, through the store's transaction whatever its
		// type, then fails with fail (nil: it does not fail).
		book := func(ctx *node.ToolContext[desk], name string, fail func() error) (string, error) {
			if b.schema == "" {
				return node.EffectTx(ctx, name, func(ctx context.Context, tx *sql.Tx) (string, error) {
					_, err := tx.ExecContext(ctx, insert, 1)
					return "booked", errors.Join(err, fail())
				})
			}
			return node.EffectTx(ctx, name, func(ctx context.Context, tx pgx.Tx) (string, error) {
				_, err := tx.Exec(ctx, insert, 1)
				return "booked", errors.Join(err, fail())
			})
		}
		seatTaken := errors.New("seat taken")
		var errs []error
		r, answer := runTool(t, s, func(ctx *node.ToolContext[desk]) (string, error) {
			_, err := book(ctx, "failing", func() error { return seatTaken })
			errs = append(errs, err)
			_, err = book(ctx, "panicking", func() error { panic("the seat map is gone") })
			errs = append(errs, err)
			_, err = book(ctx, "failing", func() error { return nil })
			errs = append(errs, err)
			if b.schema == "" {
				_, err = node.EffectTx(ctx, "wrong-type", func(context.Context, pgx.Tx) (string, error) { panic("ran") })
			} else {
				_, err = node.EffectTx(ctx, "wrong-type", func(context.Context, *sql.Tx) (string, error) { panic("ran") })
			}
			errs = append(errs, err)
			return book(ctx, "booking", func() error { return nil })
		})
		require.ErrorIs(t, errs[0], seatTaken)
		require.ErrorIs(t, errs[1], instance.ErrPanic)
		require.ErrorContains(t, errs[1], "the seat map is gone")
		require.ErrorIs(t, errs[2], instance.ErrDuplicateEffect)
		require.ErrorIs(t, errs[3], instance.ErrEffectTx)
		require.Equal(t, "result: booked", answer)
		require.Equal(t, 1, b.rows(t), "only the last booking committed")

		m, _, err := r.Load(context.Background(), "m1")
		require.NoError(t, err)
		for name, want := range map[string]store.EffectStatus{"failing": "", "panicking": "", "booking": store.EffectDone} {
			e, created, err := s.(store.EffectJournal).BeginEffect(context.Background(), store.Effect{Key: m.Root().ID + "/t1/" + name, MachineID: "m1", Name: name})
			require.NoError(t, err)
			if want == "" {
				require.True(t, created, "effect %s journaled", name)
			} else {
				require.Equal(t, want, e.Status, "effect %s", name)
			}
		}
	})
}

// A store that runs no transactions (memstore) refuses a tx effect with
// instance.ErrEffectTx, and its function does not run.
func TestEffectTxNeedsTransactions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		if _, ok := s.(store.TxEffectJournal); ok {
			t.Skip("the store runs transactions")
		}
		var err error
		runTool(t, s, func(ctx *node.ToolContext[desk]) (string, error) {
			_, err = node.EffectTx(ctx, "book", func(context.Context, *sql.Tx) (string, error) { panic("ran") })
			return "", err
		})
		require.ErrorIs(t, err, instance.ErrEffectTx)
	})
}

// A command's tx effect books once per invocation ID, however often it
// is invoked (the handler runs each time; the journal answers the
// repeat); an invocation without an ID books in a transaction of its
// own, journaling nothing.
func TestCommandEffectTx(t *testing.T) {
	processStores(t, func(t *testing.T, open func(t *testing.T) (store.Store, []string)) {
		s, env := open(t)
		b := bookingsOf(env)
		b.create(t)
		var calls, runs atomic.Int32
		bookCmd := command.New("book", "book a seat", func(ctx *command.Context[desk], _ struct{}) (string, error) {
			calls.Add(1)
			if b.schema == "" {
				return command.EffectTx(ctx, "book", func(ctx context.Context, tx *sql.Tx) (string, error) {
					runs.Add(1)
					_, err := tx.ExecContext(ctx, b.insert(), 3)
					return "booked", err
				})
			}
			return command.EffectTx(ctx, "book", func(ctx context.Context, tx pgx.Tx) (string, error) {
				runs.Add(1)
				_, err := tx.Exec(ctx, b.insert(), 3)
				return "booked", err
			})
		})
		n, err := node.New("desk", node.Config[desk]{Commands: []command.Command[desk]{bookCmd}})
		require.NoError(t, err)
		c, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{n}})
		require.NoError(t, err)
		r, err := durable.New(durable.Config{Store: s, Charter: c})
		require.NoError(t, err)
		ctx := context.Background()
		_, err = r.Create(ctx, "m1", "desk", nil)
		require.NoError(t, err)
		for _, id := range []string{"order-1", "order-1", ""} {
			_, err := runSteps(r.Invoke(ctx, "m1", command.Invocation{Name: "book", ID: id}))
			require.NoError(t, err)
		}
		require.Equal(t, int32(3), calls.Load(), "runs of the command")
		require.Equal(t, int32(2), runs.Load(), "runs of the effect")
		require.Equal(t, 2, b.rows(t), "bookings made")
	})
}
