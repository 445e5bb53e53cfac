package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/markov-agents/markov/store"
)

// BenchHistoryLengths are the history lengths [BenchmarkSave] measures a
// save at. The cost of a save must not grow with the history: the second
// should cost about the same as the first.
var BenchHistoryLengths = []int{100, 10_000}

// BenchmarkSave measures one step's save (a 2 KiB tree, two 256-byte history
// entries appended, one pending suspension) on a machine that already has
// each of [BenchHistoryLengths] history entries, as sub-benchmarks named
// "history=N". newStore returns an empty store; the benchmark closes it
// if it has a Close method.
func BenchmarkSave(b *testing.B, newStore func(b *testing.B) store.Store) {
	tree := bytes.Repeat([]byte("t"), 2048)
	entry := bytes.Repeat([]byte("m"), 256)
	for _, n := range BenchHistoryLengths {
		b.Run(fmt.Sprintf("history=%d", n), func(b *testing.B) {
			s := newStore(b)
			if cl, ok := s.(io.Closer); ok {
				defer cl.Close()
			}
			ctx := context.Background()
			var rev int64
			for done := 0; done < n || rev == 0; {
				chunk := make([][]byte, min(1000, n-done))
				for i := range chunk {
					chunk[i] = entry
				}
				var err error
				rev, err = s.Save(ctx, store.Save{MachineID: "bench", Revision: rev, Tree: tree, Append: chunk})
				if err != nil {
					b.Fatalf("setup: %v", err)
				}
				done += len(chunk)
			}
			sus := []store.Suspension{{ID: "bench-s", Status: store.StatusPending, Kind: "tool", Name: "approve",
				Reason: "benchmark", Deadline: time.Now().Add(time.Hour), CreatedAt: time.Now()}}
			app := [][]byte{entry, entry}
			b.ReportAllocs()
			for b.Loop() {
				var err error
				rev, err = s.Save(ctx, store.Save{MachineID: "bench", Revision: rev, Tree: tree, Append: app, Suspensions: sus})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
