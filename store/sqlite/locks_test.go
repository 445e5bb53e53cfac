package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
	"github.com/markov-agents/markov/store/storetest"
)

// lockHolderEnv makes this test binary a child that takes machine m's
// lock on the database the variable names, says "locked", and waits to
// be killed.
const lockHolderEnv = "MARKOV_SQLITE_LOCK_HOLDER"

func TestMain(m *testing.M) {
	testkit.Main(m, lockHolderEnv, holdLock)
}

func holdLock(path string) int {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, ok, err := s.LockMachine(ctx, "m", true); err != nil || !ok {
		fmt.Fprintln(os.Stderr, "lock:", ok, err)
		return 1
	}
	fmt.Println("locked")
	select {}
}

// linuxOnly skips t elsewhere than Linux, whose open file description
// locks the machine locks are.
func linuxOnly(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the machine locks are Linux's open file description locks")
	}
}

// TestLockMachine runs the lock checks on two stores of one database
// file: open file description locks exclude each other in one process
// as across processes.
func TestLockMachine(t *testing.T) {
	linuxOnly(t)
	a, b := sqlitetest.Pair(t)
	storetest.Locks(t, a, b)
}

// TestLockOfAKilledProcess checks that a machine lock goes with the
// process that held it, however it ends: while a child process holds it
// the lock is taken and seen, and once the child is killed (SIGKILL, no
// chance to release anything) it is free at once, with no lease to wait
// out.
func TestLockOfAKilledProcess(t *testing.T) {
	linuxOnly(t)
	ctx := context.Background()
	path := sqlitetest.Path(t)
	s := sqlitetest.Open(t, path)
	child := testkit.ChildCommand(lockHolderEnv + "=" + path)
	require.NoError(t, testkit.StartChild(child, "locked"))

	_, ok, err := s.LockMachine(ctx, "m", false)
	require.NoError(t, err)
	require.False(t, ok, "the child holds m")
	held, err := s.MachineLocked(ctx, "m")
	require.NoError(t, err)
	require.True(t, held)

	require.NoError(t, child.Process.Kill())
	require.Error(t, child.Wait(), "killed")
	unlock, ok, err := s.LockMachine(ctx, "m", false)
	require.NoError(t, err)
	require.True(t, ok, "the killed child's lock is released")
	unlock()
}

// TestReadOnlyStoreSeesLocks checks that a read-only store sees the locks
// writers hold (a status of running) but takes none, and that without
// the sidecar file, as before any writer of this version opened the
// database, it sees none held.
func TestReadOnlyStoreSeesLocks(t *testing.T) {
	linuxOnly(t)
	ctx := context.Background()
	path := sqlitetest.Path(t)
	w := sqlitetest.Open(t, path)
	require.NoError(t, os.Remove(path+"-locks"))
	ro, err := sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	held, err := ro.MachineLocked(ctx, "m")
	require.NoError(t, err)
	require.False(t, held, "no sidecar: nothing held")
	require.NoError(t, ro.Close())
	require.NoError(t, w.Close())

	w = sqlitetest.Open(t, path)
	unlock, ok, err := w.LockMachine(ctx, "m", false)
	require.NoError(t, err)
	require.True(t, ok)
	ro, err = sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	held, err = ro.MachineLocked(ctx, "m")
	require.NoError(t, err)
	require.True(t, held, "the writer holds m")
	_, _, err = ro.LockMachine(ctx, "n", false)
	require.ErrorIs(t, err, sqlite.ErrReadOnly)
	unlock()
	held, err = ro.MachineLocked(ctx, "m")
	require.NoError(t, err)
	require.False(t, held)
}
