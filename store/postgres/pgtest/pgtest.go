// Package pgtest gives tests a PostgreSQL schema of their own: the database
// named by MARKOV_TEST_POSTGRES (the test skips when it is unset, and
// fails when CI is set; .ci/run sets it), a fresh schema dropped when the test ends, and a store opened
// in it. It is imported only by tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/store/postgres"
)

// EnvVar names the database the tests use, for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const EnvVar = "MARKOV_TEST_POSTGRES"

// errNotSet is why a PostgreSQL test cannot run.
var errNotSet = errors.New(EnvVar + " is not set")

// URL returns the test database's connection string. When EnvVar is unset
// it skips tb, or fails it in CI (testkit.Require), naming how to set it.
func URL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(EnvVar)
	var unset error
	if url == "" {
		unset = errNotSet
	}
	testkit.Require(tb, unset, "a PostgreSQL database", ". .ci/pg.sh (or set "+EnvVar+" to a database URL)")
	return url
}

// Schema returns a schema name no other test uses, and drops the schema
// with everything in it when tb ends.
func Schema(tb testing.TB, url string) string {
	tb.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "markov_test_" + hex.EncodeToString(b)
	DropAtEnd(tb, url, schema)
	return schema
}

// DropAtEnd drops schema, with everything in it, from the database at url
// when tb ends.
func DropAtEnd(tb testing.TB, url, schema string) {
	tb.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
}

// Open opens a store in a schema of its own (see Schema), closed when tb
// ends, and returns it with the connection string and schema.
func Open(tb testing.TB) (s *postgres.Store, url, schema string) {
	tb.Helper()
	url = URL(tb)
	schema = Schema(tb, url)
	return OpenIn(tb, url, schema), url, schema
}

// OpenIn opens another store on url in schema, as a second process would,
// closed when tb ends.
func OpenIn(tb testing.TB, url, schema string) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), postgres.Config{ConnString: url, Schema: schema})
	if err != nil {
		tb.Fatalf("postgres.Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
