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
	{"EndedBySave", testEffectEndedBySave},
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

// testEffectEndedBySave checks Save.Effects: a save records the outcomes
// of started effects in its transaction, leaves others as they are, and
// a malformed outcome refuses the whole save.
func testEffectEndedBySave(t *testing.T, j store.EffectJournal) {
	s, ok := j.(store.Store)
	if !ok {
		t.Skip("the journal is not a store")
	}
	ctx := context.Background()
	begin(t, j, "m1/a/charge")
	begin(t, j, "m1/b/charge")
	if err := j.EndEffect(ctx, "m1/b/charge", store.EffectFailed, []byte("declined")); err != nil {
		t.Fatalf("EndEffect: %v", err)
	}
	bad := store.Save{MachineID: "m1", Tree: []byte("t"), Effects: []store.EffectEnd{{Key: "m1/a/charge", Status: store.EffectStarted}}}
	if _, err := s.Save(ctx, bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a save ending an effect as started: %v, want ErrInvalid", err)
	}
	if _, err := s.Load(ctx, "m1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused save created the machine: %v", err)
	}
	rev, err := s.Save(ctx, store.Save{MachineID: "m1", Tree: []byte("t"), Effects: []store.EffectEnd{
		{Key: "m1/a/charge", Status: store.EffectDone, Result: []byte(`{"receipt":"r1"}`)},
		{Key: "m1/b/charge", Status: store.EffectDone, Result: []byte(`{"receipt":"r2"}`)},
		{Key: "never-begun", Status: store.EffectDone, Result: []byte(`{}`)},
	}})
	if err != nil || rev != 1 {
		t.Fatalf("a save ending effects: revision %d, %v", rev, err)
	}
	if e, _ := begin(t, j, "m1/a/charge"); e.Status != store.EffectDone || string(e.Result) != `{"receipt":"r1"}` || e.EndedAt.IsZero() {
		t.Fatalf("an effect the save ended reads %+v", e)
	}
	if e, _ := begin(t, j, "m1/b/charge"); e.Status != store.EffectFailed || string(e.Result) != "declined" {
		t.Fatalf("a save changed an effect that had ended: %+v", e)
	}
	if e, created := begin(t, j, "never-begun"); !created || e.Status != store.EffectStarted {
		t.Fatalf("a save's outcome of an effect never begun made an entry: %+v", e)
	}
	// A save that fails its revision check ends nothing.
	begin(t, j, "m1/c/charge")
	if _, err := s.Save(ctx, store.Save{MachineID: "m1", Revision: 7, Tree: []byte("t"), Effects: []store.EffectEnd{{Key: "m1/c/charge", Status: store.EffectDone}}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a save on a stale revision: %v, want ErrConflict", err)
	}
	if e, _ := begin(t, j, "m1/c/charge"); e.Status != store.EffectStarted {
		t.Fatalf("a conflicting save ended an effect: %+v", e)
	}
}
