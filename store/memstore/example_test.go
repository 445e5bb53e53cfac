package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// A machine is created at revision 0, saved step by step with only its new
// history entries, and found again by one of its suspend IDs. A writer that
// based its save on a stale revision gets ErrConflict.
func Example() {
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()

	rev, _ := s.Save(ctx, store.Save{
		MachineID: "refund-42",
		Tree:      []byte("tree v1"),
		Append:    [][]byte{[]byte("user: refund order 42")},
	})
	deadline := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	rev, _ = s.Save(ctx, store.Save{
		MachineID: "refund-42",
		Revision:  rev,
		Tree:      []byte("tree v2"),
		Append:    [][]byte{[]byte("assistant: asking a human")},
		Suspensions: []store.Suspension{{
			ID: "sus-1", Status: store.StatusPending, Kind: "tool", Name: "approve", Deadline: deadline,
		}},
	})

	// Later, maybe in another process: who owns sus-1?
	sp, _ := s.FindSuspension(ctx, "sus-1")
	snap, _ := s.Load(ctx, sp.MachineID)
	fmt.Println(snap.MachineID, snap.Revision, string(snap.Tree), len(snap.History))

	// A second resumer that loaded revision 1 loses.
	_, err := s.Save(ctx, store.Save{MachineID: "refund-42", Revision: 1})
	fmt.Println(errors.Is(err, store.ErrConflict), rev)

	// A sweeper after the deadline claims the suspension, once.
	claimed, _ := s.ClaimExpired(ctx, deadline.Add(time.Minute), 10, time.Minute)
	again, _ := s.ClaimExpired(ctx, deadline.Add(time.Minute), 10, time.Minute)
	fmt.Println(len(claimed), claimed[0].ID, len(again))
	// Output:
	// refund-42 2 tree v2 2
	// true 2
	// 1 sus-1 0
}
