package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/storetest"
)

func TestLockMachine(t *testing.T) {
	a, url, schema := pgtest.Open(t)
	b := pgtest.OpenIn(t, url, schema)
	storetest.Locks(t, a, b)
}

// MachinesLocked names the machines whose lock a session holds, in
// another Store (another pool) too, and forgets a lock once released.
func TestMachinesLocked(t *testing.T) {
	a, url, schema := pgtest.Open(t)
	b := pgtest.OpenIn(t, url, schema)
	ctx := context.Background()
	unlockA, ok, err := a.LockMachine(ctx, "m1", false)
	require.NoError(t, err)
	require.True(t, ok)
	unlockC, ok, err := a.LockMachine(ctx, "m3", false)
	require.NoError(t, err)
	require.True(t, ok)
	held, err := b.MachinesLocked(ctx, []string{"m1", "m2", "m3"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"m1", "m3"}, held)
	unlockA()
	held, err = b.MachinesLocked(ctx, []string{"m1", "m2", "m3"})
	require.NoError(t, err)
	require.Equal(t, []string{"m3"}, held)
	unlockC()
	locked, err := b.MachineLocked(ctx, "m3")
	require.NoError(t, err)
	require.False(t, locked)
	held, err = b.MachinesLocked(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, held)
}
