package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

// A store in one SQLite file: what one process saves, another process that
// opens the same file finds again, here by a suspend ID (a second Open
// plays the second process). The file and its "-wal" and "-shm"
// companions live in a temporary directory removed at the end.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "markov-sqlite-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "machines.db")

	// The first process creates the machine, suspended on an approval.
	first, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		panic(err)
	}
	if _, err := first.Save(ctx, store.Save{
		MachineID:   "refund-42",
		Tree:        []byte("tree v1"),
		Append:      [][]byte{[]byte("user: refund order 42")},
		Suspensions: []store.Suspension{{ID: "sus-1", Status: store.StatusPending, Kind: "tool", Name: "approve"}},
	}); err != nil {
		panic(err)
	}
	if err := first.Close(); err != nil {
		panic(err)
	}

	// The second process opens the file and finds the machine by its
	// suspend ID.
	second, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		panic(err)
	}
	defer second.Close()
	sp, err := second.FindSuspension(ctx, "sus-1")
	if err != nil {
		panic(err)
	}
	snap, err := second.Load(ctx, sp.MachineID)
	if err != nil {
		panic(err)
	}
	fmt.Println(sp.Name, sp.Status, "held by", snap.MachineID, "at revision", snap.Revision)
	fmt.Println(string(snap.Tree), string(snap.History[0]))
	// Output:
	// approve pending held by refund-42 at revision 1
	// tree v1 user: refund order 42
}
