package postgres_test

import (
	"testing"

	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/storetest"
)

func TestLockMachine(t *testing.T) {
	a, url, schema := pgtest.Open(t)
	b := pgtest.OpenIn(t, url, schema)
	storetest.Locks(t, a, b)
}
