// Package sqlitetest opens SQLite stores for tests: on a database file in
// the test's temporary directory, closed when the test ends. It is
// imported only by tests.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/markov-agents/markov/store/sqlite"
)

// Path returns the path of a new database file in tb's temporary
// directory.
func Path(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "markov.db")
}

// Open opens a store on the database at path, closed when tb ends; it
// fails tb when the store cannot be opened.
func Open(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		tb.Fatalf("sqlitetest: open %s: %v", path, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Pair opens two stores on one new database, as two processes would.
func Pair(tb testing.TB) (*sqlite.Store, *sqlite.Store) {
	tb.Helper()
	path := Path(tb)
	return Open(tb, path), Open(tb, path)
}
