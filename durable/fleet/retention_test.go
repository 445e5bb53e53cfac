package fleet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/store"
)

// Retention deletes a finished machine as store.Delete does: its entries
// of the suspension feed go, and a machine created again under its ID
// logs after the deleted log's last event (store.EventLog), where its log
// started again at 1.
func TestRetentionKeepsEventSeqs(t *testing.T) {
	_, s, _, _ := openTestFleet(t)
	ctx := context.Background()
	c, err := charter()
	require.NoError(t, err)
	sus := store.Suspension{ID: "old-s", Status: store.StatusPending, Kind: "tool", Name: "approve", Reason: "r"}
	_, err = s.Save(ctx, store.Save{MachineID: "old", Tree: []byte("t"), Events: [][]byte{[]byte("a"), []byte("b")}, Suspensions: []store.Suspension{sus}})
	require.NoError(t, err)
	sus.Status = store.StatusResolved
	_, err = s.Save(ctx, store.Save{MachineID: "old", Revision: 1, Tree: []byte("t"), Suspensions: []store.Suspension{sus}})
	require.NoError(t, err)
	feedOf := func(id string) (n int) {
		changes, err := s.ReadSuspensionChanges(ctx, 0, 0)
		require.NoError(t, err)
		for _, c := range changes {
			if c.Suspension.MachineID == id {
				n++
			}
		}
		return n
	}
	require.NotZero(t, feedOf("old"))
	f, err := fleet.New(fleet.Config{Store: s, Charter: c, Retention: time.Nanosecond, RetentionEvery: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, f.Start(ctx))
	t.Cleanup(func() { f.Stop(ctx) }) // a second Stop does nothing
	require.Eventually(t, func() bool {
		_, err := s.Load(ctx, "old")
		return errors.Is(err, store.ErrNotFound)
	}, 20*time.Second, 20*time.Millisecond, "retention deletes the machine")
	require.NoError(t, f.Stop(ctx)) // before it deletes the next one
	require.Zero(t, feedOf("old"), "the machine's feed entries went with it")

	_, err = s.Save(ctx, store.Save{MachineID: "old", Tree: []byte("t"), Events: [][]byte{[]byte("new")}})
	require.NoError(t, err)
	evs, err := s.ReadEvents(ctx, "old", 2, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1, "a reader at the deleted log's end reads the new machine's event")
	require.Equal(t, int64(3), evs[0].Seq)
}
