package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/store"
)

// A parked machine is listed until it is saved again or deleted; parking
// it again at the same revision adds to its errors, keeping the last
// store.MaxParkedErrors.
func TestParked(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "parked.db"))
	defer s.Close()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	require.ErrorIs(t, s.Park(ctx, "ghost", "x", t0), store.ErrNotFound)
	require.ErrorIs(t, s.Park(ctx, "", "x", t0), store.ErrNotFound, "CheckID: an empty ID names no machine")
	for _, id := range []string{"a", "b"} {
		_, err := s.Save(ctx, store.Save{MachineID: id, Tree: []byte("t")})
		require.NoError(t, err)
	}
	for i := range store.MaxParkedErrors + 2 {
		require.NoError(t, s.Park(ctx, "a", "fail "+string(rune('A'+i)), t0.Add(time.Duration(i)*time.Second)))
	}
	require.NoError(t, s.Park(ctx, "b", "b fails", t0.Add(time.Hour)))
	got, err := s.ListParked(ctx, 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, store.ParkedMachine{MachineID: "b", Errors: []string{"b fails"}, At: t0.Add(time.Hour)}, got[0], "most recent first")
	require.Len(t, got[1].Errors, store.MaxParkedErrors)
	require.Equal(t, "fail C", got[1].Errors[0])
	got, err = s.ListParked(ctx, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)

	// A save unparks; parked again, it starts over.
	_, err = s.Save(ctx, store.Save{MachineID: "a", Revision: 1, Tree: []byte("t2")})
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "b"))
	got, err = s.ListParked(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, s.Park(ctx, "a", "again", t0))
	got, err = s.ListParked(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"again"}, got[0].Errors)
}
