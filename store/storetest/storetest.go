// Package storetest is the conformance suite for [store.Store]
// implementations. An implementation's tests call [Run] with a constructor
// of empty stores, and its benchmarks call [BenchmarkSave]:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
//	}
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
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/markov-agents/markov/store"
)

// Run runs the conformance suite against the stores newStore makes. Each
// subtest calls newStore once and expects an empty store; the suite closes
// the store when the subtest ends (after that, newStore's own cleanups, such
// as dropping a database, run).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateAndLoad", testCreateAndLoad},
		{"NotFound", testNotFound},
		{"MalformedIDs", testMalformedIDs},
		{"Conflicts", testConflicts},
		{"Invalid", testInvalid},
		{"SuspendIDOwnedByOtherMachine", testForeignSuspendID},
		{"HistoryOrder", testHistoryOrder},
		{"ByteOwnership", testByteOwnership},
		{"SuspensionFields", testSuspensionFields},
		{"SuspensionReplace", testSuspensionReplace},
		{"ListSuspensions", testListSuspensions},
		{"Claim", testClaim},
		{"ClaimKeptBySave", testClaimKeptBySave},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ConcurrentSaves", testConcurrentSaves},
		{"ConcurrentCreates", testConcurrentCreates},
		{"Delete", testDelete},
		{"ListMachines", testListMachines},
		{"CanceledContext", testCanceledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// t0 has nanoseconds and a non-UTC zone on purpose: stores must truncate to
// store.TimePrecision and return UTC.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))

// norm is what a store must return for a written time.
func norm(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(store.TimePrecision)
}

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func strs(bb [][]byte) []string {
	out := make([]string, len(bb))
	for i, b := range bb {
		out[i] = string(b)
	}
	return out
}

func mustSave(t testing.TB, s store.Store, sv store.Save) int64 {
	t.Helper()
	rev, err := s.Save(context.Background(), sv)
	if err != nil {
		t.Fatalf("Save(%q, revision %d): %v", sv.MachineID, sv.Revision, err)
	}
	if rev != sv.Revision+1 {
		t.Fatalf("Save(%q, revision %d) = revision %d, want %d", sv.MachineID, sv.Revision, rev, sv.Revision+1)
	}
	return rev
}

func mustLoad(t testing.TB, s store.Store, id string) *store.Snapshot {
	t.Helper()
	snap, err := s.Load(context.Background(), id)
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	if snap.MachineID != id {
		t.Fatalf("Load(%q).MachineID = %q", id, snap.MachineID)
	}
	return snap
}

func mustList(t testing.TB, s store.Store, f store.Filter) []store.Suspension {
	t.Helper()
	got, err := s.ListSuspensions(context.Background(), f)
	if err != nil {
		t.Fatalf("ListSuspensions(%+v): %v", f, err)
	}
	return got
}

func ids(ss []store.Suspension) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

// state is everything observable about one machine, for before/after checks.
type state struct {
	Revision    int64
	Tree        string
	History     []string
	Suspensions []store.Suspension
}

func stateOf(t testing.TB, s store.Store, id string) state {
	t.Helper()
	snap := mustLoad(t, s, id)
	return state{
		Revision:    snap.Revision,
		Tree:        string(snap.Tree),
		History:     strs(snap.History),
		Suspensions: mustList(t, s, store.Filter{MachineID: id}),
	}
}

func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error = %v, want %v", what, err, target)
	}
}

func wantState(t testing.TB, s store.Store, id string, want state) {
	t.Helper()
	if diff := cmp.Diff(want, stateOf(t, s, id), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("machine %q changed (-want +got):\n%s", id, diff)
	}
}

func pending(id string, deadline time.Time) store.Suspension {
	return store.Suspension{ID: id, Status: store.StatusPending, Kind: "tool", Name: "approve", Reason: "needs a human", Deadline: deadline, CreatedAt: t0}
}

func testCreateAndLoad(t *testing.T, s store.Store) {
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

func testNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	_, err := s.Load(ctx, "nope")
	wantErr(t, "Load", err, store.ErrNotFound)
	wantErr(t, "Delete", s.Delete(ctx, "nope"), store.ErrNotFound)
	_, err = s.FindSuspension(ctx, "nope")
	wantErr(t, "FindSuspension", err, store.ErrNotFound)
	if got := mustList(t, s, store.Filter{}); len(got) != 0 {
		t.Fatalf("ListSuspensions on empty store = %v", got)
	}
	got, err := s.ClaimExpired(ctx, t0, 10, time.Minute)
	if err != nil || len(got) != 0 {
		t.Fatalf("ClaimExpired on empty store = %v, %v", got, err)
	}
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

func testMalformedIDs(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t1"), Append: bs("a"), Suspensions: []store.Suspension{pending("s1", t0)}})
	want := stateOf(t, s, "m1")
	longest := strings.Repeat("m", store.MaxIDLen)
	mustSave(t, s, store.Save{MachineID: longest, Tree: []byte("t"), Suspensions: []store.Suspension{pending(longest, t0)}})
	if got, err := s.FindSuspension(ctx, longest); err != nil || got.MachineID != longest {
		t.Fatalf("FindSuspension of the longest ID = %+v, %v", got, err)
	}
	for name, id := range malformedIDs {
		t.Run(name, func(t *testing.T) {
			if store.ValidID(id) {
				t.Fatalf("ValidID(%q) = true", id)
			}
			_, err := s.Load(ctx, id)
			wantErr(t, "Load", err, store.ErrNotFound)
			wantErr(t, "Delete", s.Delete(ctx, id), store.ErrNotFound)
			_, err = s.FindSuspension(ctx, id)
			wantErr(t, "FindSuspension", err, store.ErrNotFound)
			for _, f := range []store.Filter{{MachineID: id}, {Status: id}} {
				got, err := s.ListSuspensions(ctx, f)
				if err != nil || len(got) != 0 {
					t.Fatalf("ListSuspensions(%+v) = %v, %v; want nothing", f, got, err)
				}
			}
			_, err = s.Save(ctx, store.Save{MachineID: id, Tree: []byte("t")})
			wantErr(t, "Save with the machine ID", err, store.ErrInvalid)
			_, err = s.Save(ctx, store.Save{MachineID: "m1", Revision: 1, Tree: []byte("x"), Append: bs("x"),
				Suspensions: []store.Suspension{pending(id, t0)}})
			wantErr(t, "Save with the suspend ID", err, store.ErrInvalid)
			wantState(t, s, "m1", want)
		})
	}
}

func testConflicts(t *testing.T, s store.Store) {
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
	_, err := s.FindSuspension(ctx, "bad")
	wantErr(t, "FindSuspension after conflicts", err, store.ErrNotFound)

	// A revision on a machine that does not exist.
	_, err = s.Save(ctx, store.Save{MachineID: "ghost", Revision: 1, Tree: []byte("t")})
	wantErr(t, "Save of missing machine at revision 1", err, store.ErrConflict)
	_, err = s.Load(ctx, "ghost")
	wantErr(t, "Load after failed save", err, store.ErrNotFound)
}

func testInvalid(t *testing.T, s store.Store) {
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
	for _, lease := range []time.Duration{0, -time.Second} {
		_, err := s.ClaimExpired(ctx, t0, 1, lease)
		wantErr(t, fmt.Sprintf("ClaimExpired with lease %v", lease), err, store.ErrInvalid)
	}
}

func testForeignSuspendID(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t1"), Append: bs("a"), Suspensions: []store.Suspension{pending("s1", t0)}})
	mustSave(t, s, store.Save{MachineID: "m2", Tree: []byte("t2"), Append: bs("b"), Suspensions: []store.Suspension{pending("s2", t0)}})
	want1, want2 := stateOf(t, s, "m1"), stateOf(t, s, "m2")

	_, err := s.Save(ctx, store.Save{MachineID: "m3", Tree: []byte("t3"), Suspensions: []store.Suspension{pending("s3", t0), pending("s1", t0)}})
	wantErr(t, "create with another machine's suspend ID", err, store.ErrInvalid)
	_, err = s.Load(ctx, "m3")
	wantErr(t, "Load m3", err, store.ErrNotFound)

	_, err = s.Save(ctx, store.Save{MachineID: "m1", Revision: 1, Tree: []byte("x"), Append: bs("x", "y"),
		Suspensions: []store.Suspension{pending("s9", t0), pending("s2", t0)}})
	wantErr(t, "update with another machine's suspend ID", err, store.ErrInvalid)
	wantState(t, s, "m1", want1)
	wantState(t, s, "m2", want2)
	for _, id := range []string{"s3", "s9"} {
		_, err = s.FindSuspension(ctx, id)
		wantErr(t, "FindSuspension("+id+")", err, store.ErrNotFound)
	}
}

func testHistoryOrder(t *testing.T, s store.Store) {
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

func testByteOwnership(t *testing.T, s store.Store) {
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

func testSuspensionFields(t *testing.T, s store.Store) {
	ctx := context.Background()
	in := []store.Suspension{
		{ID: "s-full", MachineID: "ignored", Status: store.StatusPending, Kind: "command", Name: "deploy",
			Reason: "waiting for CI — ünïcode", Deadline: t0.Add(time.Hour), CreatedAt: t0, ClaimedUntil: t0.Add(time.Hour)},
		{ID: "s-bare", Status: "custom"},
	}
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: in})
	want := []store.Suspension{
		{ID: "s-full", MachineID: "m", Status: store.StatusPending, Kind: "command", Name: "deploy",
			Reason: "waiting for CI — ünïcode", Deadline: norm(t0.Add(time.Hour)), CreatedAt: norm(t0)},
		{ID: "s-bare", MachineID: "m", Status: "custom"},
	}
	got := mustList(t, s, store.Filter{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ListSuspensions (-want +got):\n%s", diff)
	}
	for _, w := range want {
		g, err := s.FindSuspension(ctx, w.ID)
		if err != nil {
			t.Fatalf("FindSuspension(%q): %v", w.ID, err)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Fatalf("FindSuspension(%q) (-want +got):\n%s", w.ID, diff)
		}
		if !g.Deadline.IsZero() && g.Deadline.Location() != time.UTC {
			t.Fatalf("FindSuspension(%q).Deadline location = %v, want UTC", w.ID, g.Deadline.Location())
		}
	}
}

func testSuspensionReplace(t *testing.T, s store.Store) {
	ctx := context.Background()
	other := []store.Suspension{pending("o1", t0)}
	mustSave(t, s, store.Save{MachineID: "other", Suspensions: other})

	mustSave(t, s, store.Save{MachineID: "m", Suspensions: []store.Suspension{pending("a", t0), pending("b", t0.Add(time.Hour))}})
	if got := ids(mustList(t, s, store.Filter{MachineID: "m"})); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after first save: %v", got)
	}

	b := pending("b", t0.Add(2*time.Hour))
	b.Status, b.Reason = "resolved", "approved"
	mustSave(t, s, store.Save{MachineID: "m", Revision: 1, Suspensions: []store.Suspension{pending("c", t0.Add(time.Minute)), b}})
	_, err := s.FindSuspension(ctx, "a")
	wantErr(t, "FindSuspension of replaced entry", err, store.ErrNotFound)
	got, err := s.FindSuspension(ctx, "b")
	if err != nil || got.Status != "resolved" || got.Reason != "approved" || got.Deadline != norm(t0.Add(2*time.Hour)) || got.MachineID != "m" {
		t.Fatalf("FindSuspension(b) = %+v, %v; want the updated entry", got, err)
	}
	if got := ids(mustList(t, s, store.Filter{MachineID: "m"})); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("after replace: %v, want [c b]", got)
	}

	mustSave(t, s, store.Save{MachineID: "m", Revision: 2})
	if got := mustList(t, s, store.Filter{MachineID: "m"}); len(got) != 0 {
		t.Fatalf("after clearing: %v", got)
	}
	if got := ids(mustList(t, s, store.Filter{})); !slices.Equal(got, []string{"o1"}) {
		t.Fatalf("other machine's suspensions: %v, want [o1]", got)
	}
}

func testListSuspensions(t *testing.T, s store.Store) {
	h := time.Hour
	sp := func(id, status string, deadline, created time.Time) store.Suspension {
		return store.Suspension{ID: id, Status: status, Deadline: deadline, CreatedAt: created}
	}
	none := time.Time{}
	mustSave(t, s, store.Save{MachineID: "m1", Suspensions: []store.Suspension{
		sp("a", store.StatusPending, t0.Add(h), t0.Add(2*time.Second)),
		sp("b", store.StatusPending, none, t0),
		sp("c", "resolved", t0.Add(h/2), t0),
		sp("d", store.StatusPending, t0.Add(2*h), t0),
	}})
	mustSave(t, s, store.Save{MachineID: "m2", Suspensions: []store.Suspension{
		sp("f", store.StatusPending, t0.Add(h), t0.Add(time.Second)),
		sp("e", store.StatusPending, t0.Add(h), t0.Add(time.Second)),
		sp("g", "timed_out", none, t0.Add(-h)),
		sp("h", store.StatusPending, none, t0.Add(-h)),
	}})
	for _, tc := range []struct {
		name string
		f    store.Filter
		want []string
	}{
		{"all", store.Filter{}, []string{"c", "e", "f", "a", "d", "g", "h", "b"}},
		{"machine", store.Filter{MachineID: "m1"}, []string{"c", "a", "d", "b"}},
		{"unknown machine", store.Filter{MachineID: "m3"}, nil},
		{"pending", store.Filter{Status: store.StatusPending}, []string{"e", "f", "a", "d", "h", "b"}},
		{"status nobody has", store.Filter{Status: "nope"}, nil},
		{"deadline before is strict", store.Filter{DeadlineBefore: t0.Add(h)}, []string{"c"}},
		{"deadline before", store.Filter{DeadlineBefore: t0.Add(h + time.Microsecond)}, []string{"c", "e", "f", "a"}},
		{"pending, deadline before", store.Filter{Status: store.StatusPending, DeadlineBefore: t0.Add(3 * h)}, []string{"e", "f", "a", "d"}},
		{"limit", store.Filter{Limit: 3}, []string{"c", "e", "f"}},
		{"pending, limit", store.Filter{Status: store.StatusPending, Limit: 2}, []string{"e", "f"}},
		{"machine, pending, deadline, limit", store.Filter{MachineID: "m2", Status: store.StatusPending, DeadlineBefore: t0.Add(2 * h), Limit: 1}, []string{"e"}},
		{"large limit", store.Filter{MachineID: "m2", Limit: 100}, []string{"e", "f", "g", "h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustList(t, s, tc.f)
			if diff := cmp.Diff(tc.want, ids(got), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("ListSuspensions(%+v) (-want +got):\n%s", tc.f, diff)
			}
			for _, g := range got {
				if !tc.f.Match(g) {
					t.Fatalf("%+v does not match %+v", g, tc.f)
				}
			}
		})
	}
}

func claim(t testing.TB, s store.Store, now time.Time, limit int, lease time.Duration) []store.Suspension {
	t.Helper()
	got, err := s.ClaimExpired(context.Background(), now, limit, lease)
	if err != nil {
		t.Fatalf("ClaimExpired(%v, %d, %v): %v", now, limit, lease, err)
	}
	return got
}

func testClaim(t *testing.T, s store.Store) {
	ctx := context.Background()
	now, lease := t0, time.Minute
	resolved := pending("r1", now.Add(-3*time.Hour))
	resolved.Status = "resolved"
	mustSave(t, s, store.Save{MachineID: "m1", Suspensions: []store.Suspension{
		pending("p2", now.Add(-time.Hour)),
		pending("p4", now.Add(time.Second)),
		resolved,
	}})
	mustSave(t, s, store.Save{MachineID: "m2", Suspensions: []store.Suspension{
		pending("p1", now.Add(-2*time.Hour)),
		pending("p3", now), // a deadline equal to now has passed
		pending("p5", time.Time{}),
	}})

	got := claim(t, s, now, 2, lease)
	if !slices.Equal(ids(got), []string{"p1", "p2"}) {
		t.Fatalf("claim with limit 2 = %v, want [p1 p2]", ids(got))
	}
	until := norm(now.Add(lease))
	for _, g := range got {
		if g.ClaimedUntil != until || g.Status != store.StatusPending || g.MachineID == "" {
			t.Fatalf("claimed %+v, want ClaimedUntil %v", g, until)
		}
	}
	if got := claim(t, s, now, 0, lease); !slices.Equal(ids(got), []string{"p3"}) {
		t.Fatalf("second claim = %v, want [p3]", ids(got))
	}
	if got := claim(t, s, now, 0, lease); len(got) != 0 {
		t.Fatalf("third claim = %v, want none", ids(got))
	}
	f, err := s.FindSuspension(ctx, "p1")
	if err != nil || f.ClaimedUntil != until {
		t.Fatalf("FindSuspension(p1) = %+v, %v; want ClaimedUntil %v", f, err, until)
	}

	// p4's deadline passes; the others are still leased.
	later := now.Add(30 * time.Second)
	if got := claim(t, s, later, 0, lease); !slices.Equal(ids(got), []string{"p4"}) {
		t.Fatalf("claim at +30s = %v, want [p4]", ids(got))
	}
	if got := claim(t, s, now.Add(lease).Add(-time.Microsecond), 0, lease); len(got) != 0 {
		t.Fatalf("claim just before the lease ends = %v, want none", ids(got))
	}
	// The lease has run out: handed out again.
	if got := claim(t, s, now.Add(lease), 0, lease); !slices.Equal(ids(got), []string{"p1", "p2", "p3"}) {
		t.Fatalf("claim after the lease = %v, want [p1 p2 p3]", ids(got))
	}
	if got := claim(t, s, later.Add(lease), 0, time.Hour); !slices.Equal(ids(got), []string{"p4"}) {
		t.Fatalf("claim after p4's lease = %v, want [p4]", ids(got))
	}
	// Claims are visible in listings.
	for _, g := range mustList(t, s, store.Filter{MachineID: "m2"}) {
		if want := map[string]bool{"p1": true, "p3": true}[g.ID]; want != !g.ClaimedUntil.IsZero() {
			t.Fatalf("listed %+v: claimed = %v, want %v", g, !g.ClaimedUntil.IsZero(), want)
		}
	}
}

func testClaimKeptBySave(t *testing.T, s store.Store) {
	now, lease := t0, time.Minute
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: []store.Suspension{pending("p1", now), pending("p2", now)}})
	if got := claim(t, s, now, 1, lease); !slices.Equal(ids(got), []string{"p1"}) {
		t.Fatalf("claim = %v, want [p1]", ids(got))
	}
	// Another step of the machine keeps p1 pending (and leased) and resolves p2.
	p2 := pending("p2", now)
	p2.Status = "resolved"
	mustSave(t, s, store.Save{MachineID: "m", Revision: 1, Suspensions: []store.Suspension{pending("p1", now), p2}})
	if got := claim(t, s, now.Add(time.Second), 0, lease); len(got) != 0 {
		t.Fatalf("claim after save = %v, want none (p1 leased, p2 resolved)", ids(got))
	}
	if got := claim(t, s, now.Add(lease), 0, lease); !slices.Equal(ids(got), []string{"p1"}) {
		t.Fatalf("claim after lease = %v, want [p1]", ids(got))
	}
}

func testClaimConcurrent(t *testing.T, s store.Store) {
	now, lease := t0, time.Hour
	const machines, perMachine, workers = 3, 20, 8
	for m := range machines {
		var sus []store.Suspension
		for i := range perMachine {
			sus = append(sus, pending(fmt.Sprintf("m%d-s%02d", m, i), now.Add(-time.Duration(i)*time.Second)))
		}
		sus = append(sus, pending(fmt.Sprintf("m%d-future", m), now.Add(24*time.Hour)))
		mustSave(t, s, store.Save{MachineID: fmt.Sprintf("m%d", m), Suspensions: sus})
	}

	var (
		mu     sync.Mutex
		counts = map[string]int{}
		wg     sync.WaitGroup
		errs   = make(chan error, workers)
	)
	for range workers {
		wg.Go(func() {
			for {
				got, err := s.ClaimExpired(context.Background(), now, 4, lease)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, g := range got {
					counts[g.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("ClaimExpired: %v", err)
	}
	if len(counts) != machines*perMachine {
		t.Fatalf("claimed %d distinct suspensions, want %d", len(counts), machines*perMachine)
	}
	for id, n := range counts {
		if n != 1 || strings.HasSuffix(id, "future") {
			t.Fatalf("suspension %q handed out %d times", id, n)
		}
	}
	if got := claim(t, s, now.Add(lease), 0, lease); len(got) != machines*perMachine {
		t.Fatalf("after the lease, claimed %d, want %d", len(got), machines*perMachine)
	}
}

func testConcurrentSaves(t *testing.T, s store.Store) {
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

func testConcurrentCreates(t *testing.T, s store.Store) {
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

func testDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("t"), Append: bs("a", "b"), Suspensions: []store.Suspension{pending("s1", t0)}})
	mustSave(t, s, store.Save{MachineID: "keep", Tree: []byte("k"), Append: bs("k"), Suspensions: []store.Suspension{pending("k1", t0)}})
	keep := stateOf(t, s, "keep")

	if err := s.Delete(ctx, "m"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Load(ctx, "m")
	wantErr(t, "Load after Delete", err, store.ErrNotFound)
	_, err = s.FindSuspension(ctx, "s1")
	wantErr(t, "FindSuspension after Delete", err, store.ErrNotFound)
	wantErr(t, "second Delete", s.Delete(ctx, "m"), store.ErrNotFound)
	if got := ids(mustList(t, s, store.Filter{})); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("suspensions after Delete = %v, want [k1]", got)
	}
	if got, err := s.ListMachines(ctx); err != nil || !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("ListMachines after Delete = %v, %v", got, err)
	}
	wantState(t, s, "keep", keep)

	// A stale writer cannot resurrect it; a new create starts afresh, and the
	// deleted machine's suspend IDs are free again.
	_, err = s.Save(ctx, store.Save{MachineID: "m", Revision: 1, Tree: []byte("stale")})
	wantErr(t, "Save of deleted machine", err, store.ErrConflict)
	mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("new"), Append: bs("x")})
	wantState(t, s, "m", state{Revision: 1, Tree: "new", History: []string{"x"}})
	mustSave(t, s, store.Save{MachineID: "keep", Revision: 1, Suspensions: []store.Suspension{pending("s1", t0)}})
}

func testListMachines(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.ListMachines(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("ListMachines on empty store = %v, %v", got, err)
	}
	for _, id := range []string{"b", "a", "c/1", "c"} {
		mustSave(t, s, store.Save{MachineID: id})
	}
	got, err = s.ListMachines(ctx)
	if err != nil || !slices.Equal(got, []string{"a", "b", "c", "c/1"}) {
		t.Fatalf("ListMachines = %v, %v; want [a b c c/1]", got, err)
	}
}

func testCanceledContext(t *testing.T, s store.Store) {
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
