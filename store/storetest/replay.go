package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/markov-agents/markov/store"
)

// The replay guard's checks run on the store's own clock, which for some
// stores is the database's: their times are relative to time.Now, an hour
// away from it either way.
var replayChecks = []check[store.ReplayGuard]{
	{"Remember", testRemember},
	{"Expired", testRememberExpired},
	{"Invalid", testRememberInvalid},
	{"Concurrent", testRememberConcurrent},
	{"Forget", testForget},
	{"Outcome", testOutcome},
}

func remember(t testing.TB, g store.ReplayGuard, key string, expiresAt time.Time) bool {
	t.Helper()
	fresh, err := g.Remember(context.Background(), key, expiresAt)
	return must(t, fresh, err, "Remember(%q, %v)", key, expiresAt)
}

func testRemember(t *testing.T, g store.ReplayGuard) {
	later := time.Now().Add(time.Hour)
	if !remember(t, g, "sig-1", later) {
		t.Fatal("the first Remember of a key is not fresh")
	}
	if remember(t, g, "sig-1", later) || remember(t, g, "sig-1", later.Add(time.Hour)) {
		t.Fatal("a second Remember of a live key is fresh")
	}
	if !remember(t, g, "sig-2", later) {
		t.Fatal("another key is not fresh")
	}
}

func testRememberExpired(t *testing.T, g store.ReplayGuard) {
	past, later := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	// A record that has expired counts for nothing: the key is fresh
	// again, and then live until its new expiry.
	if !remember(t, g, "old", past) || !remember(t, g, "old", past) {
		t.Fatal("a key whose record has expired is not fresh")
	}
	if !remember(t, g, "old", later) {
		t.Fatal("a key whose record has expired is not fresh")
	}
	if remember(t, g, "old", later) {
		t.Fatal("a key remembered again until later is fresh")
	}
}

func testRememberInvalid(t *testing.T, g store.ReplayGuard) {
	later := time.Now().Add(time.Hour)
	for _, key := range append([]string{""}, maps(malformedIDs)...) {
		_, err := g.Remember(context.Background(), key, later)
		wantErr(t, fmt.Sprintf("Remember(%q)", key), err, store.ErrInvalid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Remember(ctx, "k", later); err == nil {
		t.Fatal("Remember with a canceled context succeeded")
	}
	if !remember(t, g, "k", later) {
		t.Fatal("a key refused before is not fresh")
	}
}

// maps returns the values of m.
func maps(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func testRememberConcurrent(t *testing.T, g store.ReplayGuard) {
	const workers, keys = 8, 10
	later := time.Now().Add(time.Hour)
	var fresh [keys]atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range keys {
				ok, err := g.Remember(context.Background(), fmt.Sprintf("key-%d", k), later)
				if err != nil {
					t.Errorf("Remember: %v", err)
					return
				}
				if ok {
					fresh[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range fresh {
		if n := fresh[k].Load(); n != 1 {
			t.Fatalf("key-%d was fresh for %d of %d concurrent callers, want 1", k, n, workers)
		}
	}
}

func testForget(t *testing.T, g store.ReplayGuard) {
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	remember(t, g, "kept", later)
	remember(t, g, "given-back", later)
	if err := g.Forget(ctx, "given-back"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if !remember(t, g, "given-back", later) {
		t.Fatal("a forgotten key is not fresh")
	}
	if remember(t, g, "kept", later) {
		t.Fatal("Forget of one key forgot another")
	}
	if err := g.Forget(ctx, "never-seen"); err != nil {
		t.Fatalf("Forget of a key never remembered: %v", err)
	}
	for _, key := range append([]string{""}, maps(malformedIDs)...) {
		wantErr(t, fmt.Sprintf("Forget(%q)", key), g.Forget(ctx, key), store.ErrInvalid)
	}
}

// testOutcome checks a guard that is a store.OutcomeKeeper: an outcome is
// kept with a live record only, read back as kept, and goes with the
// record (forgotten, expired and taken again).
func testOutcome(t *testing.T, g store.ReplayGuard) {
	k, ok := g.(store.OutcomeKeeper)
	if !ok {
		t.Skip("not a store.OutcomeKeeper")
	}
	ctx := context.Background()
	past, later := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	outcome := func(key string) ([]byte, error) { return k.Outcome(ctx, key) }
	if _, err := outcome("none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Outcome of a key never remembered: %v, want ErrNotFound", err)
	}
	if err := k.KeepOutcome(ctx, "none", []byte("x")); err != nil {
		t.Fatalf("KeepOutcome of a key never remembered: %v", err)
	}
	if _, err := outcome("none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("KeepOutcome made a record: %v", err)
	}
	remember(t, g, "done", later)
	if got, err := outcome("done"); err != nil || got != nil {
		t.Fatalf("Outcome before one is kept = %q, %v; want nil, nil", got, err)
	}
	if err := k.KeepOutcome(ctx, "done", []byte(`{"status":202}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := outcome("done"); err != nil || string(got) != `{"status":202}` {
		t.Fatalf("Outcome = %q, %v", got, err)
	}
	if err := g.Forget(ctx, "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := outcome("done"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Outcome of a forgotten key: %v, want ErrNotFound", err)
	}
	remember(t, g, "done", later)
	if got, err := outcome("done"); err != nil || got != nil {
		t.Fatalf("a record taken again kept the old outcome: %q, %v", got, err)
	}
	remember(t, g, "lapsed", past)
	if err := k.KeepOutcome(ctx, "lapsed", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := outcome("lapsed"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Outcome of an expired record: %v, want ErrNotFound", err)
	}
	remember(t, g, "lapsed", later)
	if got, err := outcome("lapsed"); err != nil || got != nil {
		t.Fatalf("an expired record taken again kept an outcome: %q, %v", got, err)
	}
	wantErr(t, "KeepOutcome(\"\")", k.KeepOutcome(ctx, "", nil), store.ErrInvalid)
	if _, err := outcome(""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Outcome(\"\"): %v, want ErrInvalid", err)
	}
}
