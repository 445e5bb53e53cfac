package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/markov-agents/markov/store"
)

// tailStore is a store that loads history tails.
type tailStore interface {
	store.Store
	store.TailLoader
}

var tailChecks = []check[tailStore]{
	{"Tail", testLoadTail},
	{"Incarnation", testIncarnation},
	{"Invalid", testLoadTailInvalid},
	{"Long", testLoadTailLong},
}

// mustTail is LoadTail that must succeed and hold the tree and revision
// of a Load.
func mustTail(t *testing.T, s tailStore, id string, from int) *store.Snapshot {
	t.Helper()
	snap, err := s.LoadTail(context.Background(), id, from)
	if err != nil {
		t.Fatalf("LoadTail(%q, %d): %v", id, from, err)
	}
	full := mustLoad(t, s, id)
	if snap.MachineID != id || snap.Revision != full.Revision || string(snap.Tree) != string(full.Tree) || snap.Incarnation != full.Incarnation {
		t.Fatalf("LoadTail(%q, %d) = %q rev %d tree %q incarnation %d; Load: rev %d tree %q incarnation %d",
			id, from, snap.MachineID, snap.Revision, snap.Tree, snap.Incarnation, full.Revision, full.Tree, full.Incarnation)
	}
	return snap
}

func testLoadTail(t *testing.T, s tailStore) {
	rev := mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("t1"), Append: bs("a", "b", "c")})
	mustSave(t, s, store.Save{MachineID: "m", Revision: rev, Tree: []byte("t2"), Append: bs("d", "e")})
	for _, c := range []struct {
		from, wantFrom int
		want           []string
	}{
		{0, 0, []string{"a", "b", "c", "d", "e"}},
		{3, 3, []string{"d", "e"}},
		{5, 5, []string{}},
		{9, 5, []string{}},
	} {
		snap := mustTail(t, s, "m", c.from)
		if snap.HistoryFrom != c.wantFrom || !slices.Equal(strs(snap.History), c.want) {
			t.Errorf("LoadTail(m, %d) = history %q from %d, want %q from %d", c.from, strs(snap.History), snap.HistoryFrom, c.want, c.wantFrom)
		}
	}
	if snap := mustLoad(t, s, "m"); snap.HistoryFrom != 0 || len(snap.History) != 5 {
		t.Errorf("Load = %d entries from %d, want 5 from 0", len(snap.History), snap.HistoryFrom)
	}
}

// testIncarnation: a machine keeps its incarnation across saves, and one
// created again under its ID gets another.
func testIncarnation(t *testing.T, s tailStore) {
	ctx := context.Background()
	rev := mustSave(t, s, store.Save{MachineID: "m", Append: bs("a")})
	first := mustTail(t, s, "m", 0).Incarnation
	if first == 0 {
		t.Fatal("Incarnation is 0 after a create")
	}
	mustSave(t, s, store.Save{MachineID: "m", Revision: rev, Append: bs("b")})
	if got := mustTail(t, s, "m", 1).Incarnation; got != first {
		t.Fatalf("Incarnation after a save = %d, want %d", got, first)
	}
	if err := s.Delete(ctx, "m"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustSave(t, s, store.Save{MachineID: "m", Append: bs("x")})
	mustSave(t, s, store.Save{MachineID: "m", Revision: 1, Append: bs("y")})
	if got := mustTail(t, s, "m", 0).Incarnation; got == first || got == 0 {
		t.Fatalf("Incarnation after delete and create = %d, want neither 0 nor %d", got, first)
	}
}

func testLoadTailInvalid(t *testing.T, s tailStore) {
	ctx := context.Background()
	if _, err := s.LoadTail(ctx, "missing", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LoadTail(missing) = %v, want ErrNotFound", err)
	}
	mustSave(t, s, store.Save{MachineID: "m"})
	if _, err := s.LoadTail(ctx, "m", -1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("LoadTail(m, -1) = %v, want ErrInvalid", err)
	}
}

// testLoadTailLong: a history of some hundred entries, appended a few at
// a time and many at once, loads whole and from any point, entries that
// differ in length and an empty one among them; so does the same history
// of a machine created with it at once.
func testLoadTailLong(t *testing.T, s tailStore) {
	var want []string
	for i := range 300 {
		want = append(want, strings.Repeat("x", i%7)+strconv.Itoa(i))
	}
	want[200] = ""
	rev := int64(0)
	for at, n := 0, 1; at < len(want); n = n%9 + 1 {
		if at == 20 {
			n = 150 // many at once, past block boundaries a store may have
		}
		end := min(at+n, len(want))
		rev = mustSave(t, s, store.Save{MachineID: "m", Revision: rev, Append: bs(want[at:end]...)})
		at = end
	}
	mustSave(t, s, store.Save{MachineID: "n", Append: bs(want...)})
	for _, id := range []string{"m", "n"} {
		for from := 0; from <= len(want)+1; from++ {
			snap := mustTail(t, s, id, from)
			at := min(from, len(want))
			if snap.HistoryFrom != at || !slices.Equal(strs(snap.History), want[at:]) {
				t.Fatalf("LoadTail(%s, %d) = %d entries from %d, want %d from %d", id, from, len(snap.History), snap.HistoryFrom, len(want)-at, at)
			}
		}
	}
}
