package postgres_test

import (
	"context"
	"testing"

	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/stretchr/testify/require"
)

func TestLockMachine(t *testing.T) {
	ctx := context.Background()
	a, url, schema := pgtest.Open(t)
	defer a.Close()
	b := pgtest.OpenIn(t, url, schema)
	defer b.Close()

	unlock, ok, err := a.LockMachine(ctx, "m1", true)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.LockMachine(ctx, "m1", false)
	require.NoError(t, err)
	require.False(t, ok, "held by another store (another process)")
	other, ok, err := b.LockMachine(ctx, "m2", false)
	require.NoError(t, err)
	require.True(t, ok, "locks are per machine")
	other()

	// A waiter gets the lock when it is released.
	got := make(chan func())
	go func() {
		u, _, err := b.LockMachine(ctx, "m1", true)
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	unlock()
	(<-got)()

	// A cancelled wait gives up with the context's error.
	_, _, err = a.LockMachine(ctx, "m1", true)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, ok, err = b.LockMachine(cctx, "m1", true)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ok)

	// A store that goes away (a process that dies) releases its locks.
	require.NoError(t, a.Close())
	u, ok, err := b.LockMachine(ctx, "m1", true)
	require.NoError(t, err)
	require.True(t, ok)
	u()
}
