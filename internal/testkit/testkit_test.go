package testkit_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/message"
)

func TestCollectStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	seq := func(yield func(int, error) bool) {
		_ = yield(1, nil) && yield(2, nil) && yield(0, boom) && yield(3, nil)
	}
	got, err := testkit.Collect(seq)
	if !errors.Is(err, boom) || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("Collect = %v, %v; want [1 2], boom", got, err)
	}
}

func TestSyncBufferConcurrentWriters(t *testing.T) {
	var b testkit.SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { fmt.Fprintf(&b, "%d\n", i) })
	}
	wg.Wait()
	if n := len(b.String()); n != 16 {
		t.Fatalf("wrote %d bytes, want 16", n)
	}
}

func TestHistoryAlternates(t *testing.T) {
	h := testkit.History(3)
	want := []message.Role{message.User, message.Assistant, message.User}
	for i, m := range h {
		if m.Role != want[i] {
			t.Fatalf("message %d has role %q, want %q", i, m.Role, want[i])
		}
	}
}
