package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/markov-agents/markov/store"
)

var recordChecks = []check[store.RecordKeeper]{
	{"Versions", testRecordVersions},
	{"List", testRecordList},
	{"Invalid", testRecordInvalid},
	{"Concurrent", testRecordConcurrent},
}

func putRecord(t testing.TB, k store.RecordKeeper, kind, key, data string, prev int64) int64 {
	t.Helper()
	v, err := k.PutRecord(context.Background(), store.Record{Kind: kind, Key: key, Data: []byte(data)}, prev)
	return must(t, v, err, "PutRecord(%s/%s, %d)", kind, key, prev)
}

func testRecordVersions(t *testing.T, k store.RecordKeeper) {
	ctx := context.Background()
	if _, err := k.GetRecord(ctx, "t", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRecord of no record: %v, want ErrNotFound", err)
	}
	if v := putRecord(t, k, "t", "a", "one", 0); v != 1 {
		t.Fatalf("created at version %d, want 1", v)
	}
	if _, err := k.PutRecord(ctx, store.Record{Kind: "t", Key: "a", Data: []byte("again")}, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second create: %v, want ErrConflict", err)
	}
	if v := putRecord(t, k, "t", "a", "two", 1); v != 2 {
		t.Fatalf("updated to version %d, want 2", v)
	}
	if _, err := k.PutRecord(ctx, store.Record{Kind: "t", Key: "a", Data: []byte("stale")}, 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an update from a stale version: %v, want ErrConflict", err)
	}
	r, err := k.GetRecord(ctx, "t", "a")
	if err != nil || string(r.Data) != "two" || r.Version != 2 || r.UpdatedAt.IsZero() {
		t.Fatalf("GetRecord = %+v, %v; want data two at version 2", r, err)
	}
	if _, err := k.GetRecord(ctx, "other", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRecord of another kind: %v, want ErrNotFound", err)
	}
	if err := k.DeleteRecord(ctx, "t", "a"); err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteRecord(ctx, "t", "a"); err != nil {
		t.Fatalf("deleting a deleted record: %v", err)
	}
	if _, err := k.GetRecord(ctx, "t", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRecord after delete: %v, want ErrNotFound", err)
	}
	if v := putRecord(t, k, "t", "a", "new", 0); v != 1 {
		t.Fatalf("created again at version %d, want 1", v)
	}
}

func testRecordList(t *testing.T, k store.RecordKeeper) {
	for _, key := range []string{"b/2", "a/1", "b/1", "é/1", "B/1", "b%"} {
		putRecord(t, k, "t", key, key, 0)
	}
	putRecord(t, k, "u", "b/3", "", 0)
	for prefix, want := range map[string][]string{
		"b/": {"b/1", "b/2"}, "": {"B/1", "a/1", "b%", "b/1", "b/2", "é/1"}, "é": {"é/1"}, "b%": {"b%"}, "c": nil,
	} {
		rs, err := k.ListRecords(context.Background(), "t", prefix)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			if string(r.Data) != r.Key || r.Kind != "t" || r.Version != 1 {
				t.Fatalf("ListRecords(%q) listed %+v", prefix, r)
			}
			got = append(got, r.Key)
		}
		wantStrings(t, "ListRecords("+prefix+")", got, want...)
	}
}

func testRecordInvalid(t *testing.T, k store.RecordKeeper) {
	ctx := context.Background()
	for _, c := range []struct {
		r    store.Record
		prev int64
	}{
		{store.Record{Kind: "", Key: "k"}, 0},
		{store.Record{Kind: "t", Key: ""}, 0},
		{store.Record{Kind: "t", Key: "a\x00b"}, 0},
		{store.Record{Kind: "t", Key: "k"}, -1},
	} {
		if _, err := k.PutRecord(ctx, c.r, c.prev); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutRecord(%+v, %d) = %v, want ErrInvalid", c.r, c.prev, err)
		}
	}
	if rs, err := k.ListRecords(ctx, "t", ""); err != nil || len(rs) != 0 {
		t.Fatalf("after refused puts: %v, %v; want no records", rs, err)
	}
}

func testRecordConcurrent(t *testing.T, k store.RecordKeeper) {
	putRecord(t, k, "t", "c", "0", 0)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := k.PutRecord(context.Background(), store.Record{Kind: "t", Key: "c", Data: []byte("1")}, 1)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("a losing update: %v, want ErrConflict", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d updates from one version won, want 1", wins.Load())
	}
}
