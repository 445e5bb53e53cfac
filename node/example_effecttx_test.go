package node_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/sqlite"
)

func ExampleEffectTx() {
	dir, err := os.MkdirTemp("", "markov-effecttx-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "app.db")})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	// The application's own table, in the store's database.
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE bookings (seat INTEGER NOT NULL)`); err != nil {
		panic(err)
	}

	type bookIn struct {
		Seat int `json:"seat"`
	}
	type desk struct{}
	// effects:book:begin
	book := node.NewTool("book", "Book a seat.", func(ctx *node.ToolContext[desk], in bookIn) (string, error) {
		// The insert and the effect's journal entry commit together: a
		// call that runs again after a crash gets the journaled result,
		// and a crash before the commit leaves nothing behind.
		return node.EffectTx(ctx, "book", func(ctx context.Context, tx *sql.Tx) (string, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO bookings (seat) VALUES (?)`, in.Seat); err != nil {
				return "", err
			}
			return fmt.Sprintf("seat %d booked", in.Seat), nil
		})
	})
	// effects:book:end
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{book}})
	if err != nil {
		panic(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{
		Model: scripted.New(scripted.Tool("book", bookIn{Seat: 7}), scripted.Text("Seat 7 is yours.")),
		Nodes: []*node.Node{n},
	})
	if err != nil {
		panic(err)
	}
	r, err := durable.New(durable.Config{Store: st, Charter: charter})
	if err != nil {
		panic(err)
	}
	if _, err := r.Create(ctx, "m1", "desk", nil); err != nil {
		panic(err)
	}
	for step, err := range r.Run(ctx, "m1", machine.UserText("Book seat 7.")) {
		if err != nil {
			panic(err)
		}
		if step.Done {
			fmt.Println(step.Messages[len(step.Messages)-1].Text())
		}
	}
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM bookings`).Scan(&rows); err != nil {
		panic(err)
	}
	fmt.Println("bookings:", rows)
	// Output:
	// Seat 7 is yours.
	// bookings: 1
}
