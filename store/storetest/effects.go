package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/markov-agents/markov/store"
)

var effectChecks = []check[store.EffectJournal]{
	{"Lifecycle", testEffectLifecycle},
	{"Failed", testEffectFailed},
	{"Forget", testEffectForget},
	{"Invalid", testEffectInvalid},
	{"Concurrent", testEffectConcurrent},
}

func begin(t testing.TB, j store.EffectJournal, key string) (store.Effect, bool) {
	t.Helper()
	e, created, err := j.BeginEffect(context.Background(), store.Effect{Key: key, MachineID: "m1", Name: "charge", Digest: "d1"})
	if err != nil {
		t.Fatalf("BeginEffect(%q): %v", key, err)
	}
	return e, created
}

func testEffectLifecycle(t *testing.T, j store.EffectJournal) {
	ctx := context.Background()
	e, created := begin(t, j, "root/toolu_1/charge")
	if !created || e.Status != store.EffectStarted || e.StartedAt.IsZero() || !e.EndedAt.IsZero() {
		t.Fatalf("first BeginEffect: created %v, %+v", created, e)
	}
	again, created := begin(t, j, "root/toolu_1/charge")
	if created || again.Status != store.EffectStarted || again.Name != "charge" || again.Digest != "d1" || again.MachineID != "m1" {
		t.Fatalf("second BeginEffect of a started effect: created %v, %+v", created, again)
	}
	if err := j.EndEffect(ctx, "root/toolu_1/charge", store.EffectDone, []byte(`{"receipt":"r1"}`)); err != nil {
		t.Fatalf("EndEffect: %v", err)
	}
	done, created := begin(t, j, "root/toolu_1/charge")
	if created || done.Status != store.EffectDone || string(done.Result) != `{"receipt":"r1"}` || done.EndedAt.IsZero() {
		t.Fatalf("BeginEffect of a done effect: created %v, %+v", created, done)
	}
	if err := j.EndEffect(ctx, "root/toolu_1/charge", store.EffectDone, []byte(`{}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("EndEffect of a done effect: %v, want ErrConflict", err)
	}
	if err := j.EndEffect(ctx, "never-begun", store.EffectDone, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("EndEffect of no effect: %v, want ErrConflict", err)
	}
	if e, _ := begin(t, j, "root/toolu_1/charge"); string(e.Result) != `{"receipt":"r1"}` {
		t.Fatalf("a refused EndEffect changed the entry: %+v", e)
	}
}

func testEffectFailed(t *testing.T, j store.EffectJournal) {
	begin(t, j, "k")
	if err := j.EndEffect(context.Background(), "k", store.EffectFailed, []byte("card declined")); err != nil {
		t.Fatalf("EndEffect: %v", err)
	}
	if e, _ := begin(t, j, "k"); e.Status != store.EffectFailed || string(e.Result) != "card declined" {
		t.Fatalf("a failed effect reads %+v", e)
	}
}

func testEffectForget(t *testing.T, j store.EffectJournal) {
	begin(t, j, "k")
	if err := j.ForgetEffect(context.Background(), "k"); err != nil {
		t.Fatalf("ForgetEffect: %v", err)
	}
	if err := j.ForgetEffect(context.Background(), "k"); err != nil {
		t.Fatalf("ForgetEffect of no entry: %v", err)
	}
	if _, created := begin(t, j, "k"); !created {
		t.Fatal("BeginEffect after ForgetEffect does not create the entry")
	}
}

func testEffectInvalid(t *testing.T, j store.EffectJournal) {
	ctx := context.Background()
	for _, e := range []store.Effect{{Key: "", MachineID: "m"}, {Key: "k", MachineID: ""}, {Key: "k\x00", MachineID: "m"}} {
		if _, _, err := j.BeginEffect(ctx, e); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("BeginEffect(%q, %q): %v, want ErrInvalid", e.Key, e.MachineID, err)
		}
	}
	begin(t, j, "k")
	if err := j.EndEffect(ctx, "k", store.EffectStarted, nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("EndEffect with status started: %v, want ErrInvalid", err)
	}
	if err := j.ForgetEffect(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ForgetEffect of an empty key: %v, want ErrInvalid", err)
	}
}

func testEffectConcurrent(t *testing.T, j store.EffectJournal) {
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, c, err := j.BeginEffect(context.Background(), store.Effect{Key: "k", MachineID: "m1", Name: "charge"})
			if err != nil {
				t.Errorf("BeginEffect: %v", err)
			}
			if c {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d concurrent BeginEffects created the entry, want 1", created.Load())
	}
}
