package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/markov-agents/markov/store"
)

var snapshotChecks = []check[store.Snapshots]{
	{"CreateAndLoad", testCreateAndLoad},
	{"NotFound", testNotFound},
	{"MalformedIDs", testMalformedIDs},
	{"Conflicts", testConflicts},
	{"Invalid", testInvalid},
	{"HistoryOrder", testHistoryOrder},
	{"ByteOwnership", testByteOwnership},
	{"ConcurrentSaves", testConcurrentSaves},
	{"ConcurrentCreates", testConcurrentCreates},
	{"Delete", testDelete},
	{"CanceledContext", testCanceledContext},
}

func testCreateAndLoad(t *testing.T, s store.Snapshots) {
	before := time.Now().Add(-time.Minute)
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("tree-1"), Append: bs("a", "b")})
	snap := mustLoad(t, s, "m1")
	if snap.Revision != 1 || string(snap.Tree) != "tree-1" || !slices.Equal(strs(snap.History), []string{"a", "b"}) {
		t.Fatalf("after create: %+v", snap)
	}
	if snap.UpdatedAt.Location() != time.UTC || snap.UpdatedAt.Before(before) || snap.UpdatedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("UpdatedAt = %v, want about now, in UTC", snap.UpdatedAt)
	}

	mustSave(t, s, store.Save{MachineID: "m1", Revision: 1, Tree: []byte("tree-2"), Append: bs("c")})
	snap = mustLoad(t, s, "m1")
	if snap.Revision != 2 || string(snap.Tree) != "tree-2" || !slices.Equal(strs(snap.History), []string{"a", "b", "c"}) {
		t.Fatalf("after update: %+v", snap)
	}

	// Nothing appended, empty tree; then empty entries are entries.
	mustSave(t, s, store.Save{MachineID: "m1", Revision: 2})
	snap = mustLoad(t, s, "m1")
	if snap.Revision != 3 || len(snap.Tree) != 0 || len(snap.History) != 3 {
		t.Fatalf("after empty save: %+v", snap)
	}
	mustSave(t, s, store.Save{MachineID: "m1", Revision: 3, Tree: []byte{0, 1, 0xff}, Append: [][]byte{{}, nil, {0}}})
	snap = mustLoad(t, s, "m1")
	if want := []string{"a", "b", "c", "", "", "\x00"}; !slices.Equal(strs(snap.History), want) || string(snap.Tree) != "\x00\x01\xff" {
		t.Fatalf("after binary save: tree %q history %q, want history %q", snap.Tree, strs(snap.History), want)
	}
}

func testNotFound(t *testing.T, s store.Snapshots) {
	ctx := context.Background()
	_, err := s.Load(ctx, "nope")
	wantErr(t, "Load", err, store.ErrNotFound)
	wantErr(t, "Delete", s.Delete(ctx, "nope"), store.ErrNotFound)
}

// malformedIDs are IDs no store keeps: each is refused alike, as not found
// on lookups and invalid in saves, whatever the database's text rules.
var malformedIDs = map[string]string{
	"NUL":                "m\x001",
	"invalid UTF-8":      "m\xff\xfe",
	"truncated UTF-8":    "m\xe2\x82",
	"overlong":           strings.Repeat("m", store.MaxIDLen+1),
	"overlong multibyte": strings.Repeat("é", store.MaxIDLen/2+1),
}

func testMalformedIDs(t *testing.T, s store.Snapshots) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t1"), Append: bs("a"), Suspensions: []store.Suspension{pending("s1", t0)}})
	want := stateOf(t, s, "m1")
	longest := strings.Repeat("m", store.MaxIDLen)
	mustSave(t, s, store.Save{MachineID: longest, Tree: []byte("t"), Suspensions: []store.Suspension{pending(longest, t0)}})
	if got := mustLoad(t, s, longest); string(got.Tree) != "t" {
		t.Fatalf("Load of the longest ID = %+v", got)
	}
	for name, id := range malformedIDs {
		t.Run(name, func(t *testing.T) {
			if store.ValidID(id) {
				t.Fatalf("ValidID(%q) = true", id)
			}
			_, err := s.Load(ctx, id)
			wantErr(t, "Load", err, store.ErrNotFound)
			wantErr(t, "Delete", s.Delete(ctx, id), store.ErrNotFound)
			_, err = s.Save(ctx, store.Save{MachineID: id, Tree: []byte("t")})
			wantErr(t, "Save with the machine ID", err, store.ErrInvalid)
			_, err = s.Save(ctx, store.Save{MachineID: "m1", Revision: 1, Tree: []byte("x"), Append: bs("x"),
				Suspensions: []store.Suspension{pending(id, t0)}})
			wantErr(t, "Save with the suspend ID", err, store.ErrInvalid)
			wantState(t, s, "m1", want)
		})
	}
}

func testConflicts(t *testing.T, s store.Snapshots) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t1"), Append: bs("a"), Suspensions: []store.Suspension{pending("s1", t0)}})
	mustSave(t, s, store.Save{MachineID: "m1", Revision: 1, Tree: []byte("t2"), Append: bs("b"), Suspensions: []store.Suspension{pending("s2", t0)}})
	want := stateOf(t, s, "m1")

	for _, rev := range []int64{0, 1, 3, 100} {
		_, err := s.Save(ctx, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("bad"), Append: bs("bad"),
			Suspensions: []store.Suspension{pending("bad", t0)}})
		wantErr(t, fmt.Sprintf("Save at revision %d (stored 2)", rev), err, store.ErrConflict)
		wantState(t, s, "m1", want)
	}
	wantNoSuspension(t, s, "bad")

	// A revision on a machine that does not exist.
	_, err := s.Save(ctx, store.Save{MachineID: "ghost", Revision: 1, Tree: []byte("t")})
	wantErr(t, "Save of missing machine at revision 1", err, store.ErrConflict)
	_, err = s.Load(ctx, "ghost")
	wantErr(t, "Load after failed save", err, store.ErrNotFound)
}

func testInvalid(t *testing.T, s store.Snapshots) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t1"), Append: bs("a")})
	want := stateOf(t, s, "m1")
	for _, tc := range []struct {
		name string
		save store.Save
	}{
		{"empty machine ID", store.Save{Tree: []byte("t")}},
		{"negative revision", store.Save{MachineID: "m2", Revision: -1}},
		{"empty suspend ID", store.Save{MachineID: "m2", Suspensions: []store.Suspension{pending("", t0)}}},
		{"empty status", store.Save{MachineID: "m2", Suspensions: []store.Suspension{{ID: "s1"}}}},
		{"unknown status", store.Save{MachineID: "m2", Suspensions: []store.Suspension{{ID: "s1", Status: "timed_out"}}}},
		{"duplicate suspend ID", store.Save{MachineID: "m2", Suspensions: []store.Suspension{pending("s1", t0), pending("s1", time.Time{})}}},
		{"duplicate suspend ID on update", store.Save{MachineID: "m1", Revision: 1, Append: bs("x"), Suspensions: []store.Suspension{pending("s1", t0), pending("s1", t0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Save(ctx, tc.save)
			wantErr(t, "Save", err, store.ErrInvalid)
			wantState(t, s, "m1", want)
			_, err = s.Load(ctx, "m2")
			wantErr(t, "Load m2", err, store.ErrNotFound)
		})
	}
}

func testHistoryOrder(t *testing.T, s store.Snapshots) {
	var want []string
	var rev int64
	n := 0
	for i := range 150 {
		var app [][]byte
		for range i % 4 { // 0..3 entries per save
			e := fmt.Sprintf("msg-%04d-\x00\xff", n)
			n++
			app = append(app, []byte(e))
			want = append(want, e)
		}
		rev = mustSave(t, s, store.Save{MachineID: "m", Revision: rev, Tree: fmt.Appendf(nil, "tree-%d", i), Append: app})
	}
	snap := mustLoad(t, s, "m")
	if snap.Revision != 150 || string(snap.Tree) != "tree-149" {
		t.Fatalf("revision %d tree %q, want 150 tree-149", snap.Revision, snap.Tree)
	}
	if diff := cmp.Diff(want, strs(snap.History)); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
}

func testByteOwnership(t *testing.T, s store.Snapshots) {
	tree, entry := []byte("tree"), []byte("entry")
	app := [][]byte{entry}
	mustSave(t, s, store.Save{MachineID: "m", Tree: tree, Append: app})
	tree[0], entry[0], app[0] = 'X', 'X', []byte("replaced")

	snap := mustLoad(t, s, "m")
	if string(snap.Tree) != "tree" || !slices.Equal(strs(snap.History), []string{"entry"}) {
		t.Fatalf("store kept the caller's slices: tree %q history %q", snap.Tree, strs(snap.History))
	}
	snap.Tree[0], snap.History[0][0] = 'Y', 'Y'
	snap.History = append(snap.History, []byte("more"))
	snap = mustLoad(t, s, "m")
	if string(snap.Tree) != "tree" || !slices.Equal(strs(snap.History), []string{"entry"}) {
		t.Fatalf("store returned its own slices: tree %q history %q", snap.Tree, strs(snap.History))
	}
}

func testConcurrentSaves(t *testing.T, s store.Snapshots) {
	mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("t0"), Append: bs("start")})
	const writers = 10
	var (
		wg   sync.WaitGroup
		errs [writers]error
		revs [writers]int64
	)
	for i := range writers {
		wg.Go(func() {
			revs[i], errs[i] = s.Save(context.Background(), store.Save{
				MachineID: "m", Revision: 1,
				Tree:        fmt.Appendf(nil, "tree-%d", i),
				Append:      bs(fmt.Sprintf("from-%d-a", i), fmt.Sprintf("from-%d-b", i)),
				Suspensions: []store.Suspension{pending(fmt.Sprintf("s-%d", i), t0)},
			})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won", winner, i)
			}
			if revs[i] != 2 {
				t.Fatalf("winner got revision %d, want 2", revs[i])
			}
			winner = i
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("writer %d: %v, want ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer won")
	}
	wantState(t, s, "m", state{
		Revision:    2,
		Tree:        fmt.Sprintf("tree-%d", winner),
		History:     []string{"start", fmt.Sprintf("from-%d-a", winner), fmt.Sprintf("from-%d-b", winner)},
		Suspensions: []store.Suspension{{ID: fmt.Sprintf("s-%d", winner), MachineID: "m", Status: store.StatusPending, Kind: "tool", Name: "approve", Reason: "needs a human", Deadline: norm(t0), CreatedAt: norm(t0)}},
	})
}

func testConcurrentCreates(t *testing.T, s store.Snapshots) {
	const writers = 10
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won []int
	)
	for i := range writers {
		wg.Go(func() {
			_, err := s.Save(context.Background(), store.Save{MachineID: "m", Tree: fmt.Appendf(nil, "tree-%d", i), Append: bs(fmt.Sprint(i))})
			if err != nil && !errors.Is(err, store.ErrConflict) {
				t.Errorf("writer %d: %v, want nil or ErrConflict", i, err)
				return
			}
			if err == nil {
				mu.Lock()
				won = append(won, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("writers %v won, want exactly one", won)
	}
	wantState(t, s, "m", state{Revision: 1, Tree: fmt.Sprintf("tree-%d", won[0]), History: []string{fmt.Sprint(won[0])}})
}

func testDelete(t *testing.T, s store.Snapshots) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("t"), Append: bs("a", "b"), Suspensions: []store.Suspension{pending("s1", t0)}})
	mustSave(t, s, store.Save{MachineID: "keep", Tree: []byte("k"), Append: bs("k"), Suspensions: []store.Suspension{pending("k1", t0)}})
	keep := stateOf(t, s, "keep")

	if err := s.Delete(ctx, "m"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Load(ctx, "m")
	wantErr(t, "Load after Delete", err, store.ErrNotFound)
	wantNoSuspension(t, s, "s1")
	wantErr(t, "second Delete", s.Delete(ctx, "m"), store.ErrNotFound)
	wantState(t, s, "keep", keep)

	// A stale writer cannot resurrect it; a new create starts afresh, and the
	// deleted machine's suspend IDs are free again.
	_, err = s.Save(ctx, store.Save{MachineID: "m", Revision: 1, Tree: []byte("stale")})
	wantErr(t, "Save of deleted machine", err, store.ErrConflict)
	mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("new"), Append: bs("x")})
	wantState(t, s, "m", state{Revision: 1, Tree: "new", History: []string{"x"}})
	mustSave(t, s, store.Save{MachineID: "keep", Revision: 1, Suspensions: []store.Suspension{pending("s1", t0)}})
}

func testCanceledContext(t *testing.T, s store.Snapshots) {
	mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("t"), Append: bs("a")})
	want := stateOf(t, s, "m")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Revision: 1, Tree: []byte("x"), Append: bs("x")}); err == nil {
		t.Fatal("Save with a canceled context succeeded")
	}
	if _, err := s.Load(ctx, "m"); err == nil {
		t.Fatal("Load with a canceled context succeeded")
	}
	wantState(t, s, "m", want)
}
