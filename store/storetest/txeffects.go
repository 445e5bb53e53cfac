package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/markov-agents/markov/store"
)

// txJournal is a store whose effects can run in its transactions.
type txJournal interface {
	store.EffectJournal
	store.TxEffectJournal
}

var txEffectChecks = []check[txJournal]{
	{"Lifecycle", testTxEffectLifecycle},
	{"RolledBack", testTxEffectRolledBack},
	{"Started", testTxEffectStarted},
	{"NoKey", testTxEffectNoKey},
	{"Invalid", testTxEffectInvalid},
	{"Concurrent", testTxEffectConcurrent},
}

// runTx runs an effect of key in a transaction whose fn returns result
// and counts its runs in ran.
func runTx(t testing.TB, j txJournal, key string, result string, ran *int) (store.Effect, bool) {
	t.Helper()
	e, committed, err := j.RunEffectTx(context.Background(), store.Effect{Key: key, MachineID: "m1", Name: "book", Digest: "d1"},
		func(ctx context.Context, tx any) ([]byte, error) {
			if tx == nil {
				t.Error("fn got no transaction")
			}
			*ran++
			return []byte(result), nil
		})
	if err != nil {
		t.Fatalf("RunEffectTx(%q): %v", key, err)
	}
	return e, committed
}

func testTxEffectLifecycle(t *testing.T, j txJournal) {
	runs := 0
	e, ran := runTx(t, j, "root/toolu_1/book", `{"seat":7}`, &runs)
	if !ran || runs != 1 || e.Status != store.EffectDone || string(e.Result) != `{"seat":7}` || e.StartedAt.IsZero() || e.EndedAt.IsZero() {
		t.Fatalf("first RunEffectTx: ran %v (fn %d times), %+v", ran, runs, e)
	}
	again, ran := runTx(t, j, "root/toolu_1/book", `{"seat":8}`, &runs)
	if ran || runs != 1 || again.Status != store.EffectDone || string(again.Result) != `{"seat":7}` || again.Name != "book" || again.MachineID != "m1" {
		t.Fatalf("second RunEffectTx: ran %v (fn %d times), %+v", ran, runs, again)
	}
	stored, created := begin(t, j, "root/toolu_1/book")
	if created || stored.Status != store.EffectDone || string(stored.Result) != `{"seat":7}` {
		t.Fatalf("BeginEffect of a tx effect: created %v, %+v", created, stored)
	}
}

// An error of fn rolls the transaction back: no entry, and the error as
// is.
func testTxEffectRolledBack(t *testing.T, j txJournal) {
	boom := errors.New("seat taken")
	_, ran, err := j.RunEffectTx(context.Background(), store.Effect{Key: "k", MachineID: "m1", Name: "book"},
		func(context.Context, any) ([]byte, error) { return nil, boom })
	if !errors.Is(err, boom) || ran {
		t.Fatalf("RunEffectTx whose fn fails: ran %v, %v, want the fn's error", ran, err)
	}
	if _, created := begin(t, j, "k"); !created {
		t.Fatal("a failed tx effect left an entry")
	}
}

// An entry another effect left started is returned, and fn does not run.
func testTxEffectStarted(t *testing.T, j txJournal) {
	begin(t, j, "k")
	runs := 0
	e, ran := runTx(t, j, "k", `{}`, &runs)
	if ran || runs != 0 || e.Status != store.EffectStarted {
		t.Fatalf("RunEffectTx of a started effect: ran %v (fn %d times), %+v", ran, runs, e)
	}
}

// An empty key runs fn in a transaction and journals nothing.
func testTxEffectNoKey(t *testing.T, j txJournal) {
	runs := 0
	for range 2 {
		if e, ran := runTx(t, j, "", `{"n":1}`, &runs); !ran || string(e.Result) != `{"n":1}` {
			t.Fatalf("RunEffectTx without a key: ran %v, %+v", ran, e)
		}
	}
	if runs != 2 {
		t.Fatalf("fn ran %d times without a key, want 2", runs)
	}
}

func testTxEffectInvalid(t *testing.T, j txJournal) {
	for _, e := range []store.Effect{{Key: "k", MachineID: ""}, {Key: "k\x00", MachineID: "m"}} {
		_, _, err := j.RunEffectTx(context.Background(), e, func(context.Context, any) ([]byte, error) {
			t.Error("fn ran for an invalid effect")
			return nil, nil
		})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RunEffectTx(%q, %q): %v, want ErrInvalid", e.Key, e.MachineID, err)
		}
	}
}

// Of concurrent runs of one effect, one runs fn; the others get its
// entry.
func testTxEffectConcurrent(t *testing.T, j txJournal) {
	var runs atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			e, _, err := j.RunEffectTx(context.Background(), store.Effect{Key: "k", MachineID: "m1", Name: "book"},
				func(context.Context, any) ([]byte, error) {
					runs.Add(1)
					return []byte(`"once"`), nil
				})
			if err != nil || string(e.Result) != `"once"` {
				t.Errorf("RunEffectTx: %v, %+v", err, e)
			}
		})
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times in concurrent RunEffectTx calls, want 1", runs.Load())
	}
}
