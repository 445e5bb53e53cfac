package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/markov-agents/markov/store"
)

var indexChecks = []check[store.Store]{
	{"NotFound", testIndexNotFound},
	{"MalformedIDs", testIndexMalformedIDs},
	{"SuspendIDOwnedByOtherMachine", testForeignSuspendID},
	{"SuspensionFields", testSuspensionFields},
	{"SuspensionReplace", testSuspensionReplace},
	{"ListSuspensions", testListSuspensions},
	{"Delete", testIndexDelete},
	{"Statuses", testStatuses},
	{"BadStatus", testBadStatus},
	{"Events", testEvents},
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

func testSuspensionFields(t *testing.T, s store.Store) {
	ctx := context.Background()
	in := []store.Suspension{
		{ID: "s-full", MachineID: "ignored", Status: store.StatusPending, Kind: "command", Name: "deploy",
			Reason: "waiting for CI — ünïcode", Deadline: t0.Add(time.Hour), CreatedAt: t0, ClaimedUntil: t0.Add(time.Hour), Event: "ci.passed"},
		{ID: "s-bare", Status: store.StatusCancelled},
	}
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: in})
	want := []store.Suspension{
		{ID: "s-full", MachineID: "m", Status: store.StatusPending, Kind: "command", Name: "deploy",
			Reason: "waiting for CI — ünïcode", Deadline: norm(t0.Add(time.Hour)), CreatedAt: norm(t0), Event: "ci.passed"},
		{ID: "s-bare", MachineID: "m", Status: store.StatusCancelled},
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
	b.Status, b.Reason = store.StatusResolved, "approved"
	mustSave(t, s, store.Save{MachineID: "m", Revision: 1, Suspensions: []store.Suspension{pending("c", t0.Add(time.Minute)), b}})
	_, err := s.FindSuspension(ctx, "a")
	wantErr(t, "FindSuspension of replaced entry", err, store.ErrNotFound)
	got, err := s.FindSuspension(ctx, "b")
	if err != nil || got.Status != store.StatusResolved || got.Reason != "approved" || got.Deadline != norm(t0.Add(2*time.Hour)) || got.MachineID != "m" {
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
	sp := func(id string, status store.Status, deadline, created time.Time) store.Suspension {
		return store.Suspension{ID: id, Status: status, Deadline: deadline, CreatedAt: created}
	}
	none := time.Time{}
	mustSave(t, s, store.Save{MachineID: "m1", Suspensions: []store.Suspension{
		sp("a", store.StatusPending, t0.Add(h), t0.Add(2*time.Second)),
		sp("b", store.StatusPending, none, t0),
		sp("c", store.StatusResolved, t0.Add(h/2), t0),
		sp("d", store.StatusPending, t0.Add(2*h), t0),
	}})
	mustSave(t, s, store.Save{MachineID: "m2", Suspensions: []store.Suspension{
		sp("f", store.StatusPending, t0.Add(h), t0.Add(time.Second)),
		sp("e", store.StatusPending, t0.Add(h), t0.Add(time.Second)),
		sp("g", store.StatusExpired, none, t0.Add(-h)),
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
		{"resolved", store.Filter{Status: store.StatusResolved}, []string{"c"}},
		{"expired", store.Filter{Status: store.StatusExpired}, []string{"g"}},
		{"status nobody has", store.Filter{Status: store.StatusCancelled}, nil},
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

func testIndexNotFound(t *testing.T, s store.Store) {
	_, err := s.FindSuspension(context.Background(), "nope")
	wantErr(t, "FindSuspension", err, store.ErrNotFound)
	if got := mustList(t, s, store.Filter{}); len(got) != 0 {
		t.Fatalf("ListSuspensions on empty store = %v", got)
	}
}

func testIndexMalformedIDs(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1", Suspensions: []store.Suspension{pending("s1", t0)}})
	longest := strings.Repeat("m", store.MaxIDLen)
	mustSave(t, s, store.Save{MachineID: longest, Tree: []byte("t"), Suspensions: []store.Suspension{pending(longest, t0)}})
	if got, err := s.FindSuspension(ctx, longest); err != nil || got.MachineID != longest {
		t.Fatalf("FindSuspension of the longest ID = %+v, %v", got, err)
	}
	for name, id := range malformedIDs {
		t.Run(name, func(t *testing.T) {
			_, err := s.FindSuspension(ctx, id)
			wantErr(t, "FindSuspension", err, store.ErrNotFound)
			got, err := s.ListSuspensions(ctx, store.Filter{MachineID: id})
			if err != nil || len(got) != 0 {
				t.Fatalf("ListSuspensions(MachineID %q) = %v, %v; want nothing", id, got, err)
			}
		})
	}
}

func testIndexDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: []store.Suspension{pending("s1", t0)}})
	mustSave(t, s, store.Save{MachineID: "keep", Suspensions: []store.Suspension{pending("k1", t0)}})
	if err := s.Delete(ctx, "m"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.FindSuspension(ctx, "s1")
	wantErr(t, "FindSuspension after Delete", err, store.ErrNotFound)
	if got := ids(mustList(t, s, store.Filter{})); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("suspensions after Delete = %v, want [k1]", got)
	}
	// The deleted machine's suspend IDs are free again.
	mustSave(t, s, store.Save{MachineID: "keep", Revision: 1, Suspensions: []store.Suspension{pending("s1", t0)}})
}

// testStatuses saves one suspension of each status and selects each by it.
func testStatuses(t *testing.T, s store.Store) {
	var sus []store.Suspension
	for i, st := range store.Statuses() {
		sp := pending(string(st), t0.Add(time.Duration(i)*time.Minute))
		sp.Status = st
		sus = append(sus, sp)
	}
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: sus})
	for _, st := range store.Statuses() {
		if got := ids(mustList(t, s, store.Filter{Status: st})); !slices.Equal(got, []string{string(st)}) {
			t.Fatalf("ListSuspensions(status %s) = %v, want [%s]", st, got, st)
		}
		got, err := s.FindSuspension(context.Background(), string(st))
		if err != nil || got.Status != st {
			t.Fatalf("FindSuspension(%s) = %+v, %v; want status %s", st, got, err, st)
		}
	}
}

// badStatuses are statuses no store keeps.
var badStatuses = []store.Status{"Pending", "resolved ", "timed_out", "pending\x00", "\xff"}

// testBadStatus checks that a status outside store.Statuses is refused in
// saves and filters, with ErrUnknownStatus and ErrInvalid, changing
// nothing.
func testBadStatus(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m", Tree: []byte("t"), Suspensions: []store.Suspension{pending("s1", t0)}})
	want := stateOf(t, s, "m")
	for _, st := range append(badStatuses, "") {
		sp := pending("s2", t0)
		sp.Status = st
		_, err := s.Save(ctx, store.Save{MachineID: "m", Revision: 1, Suspensions: []store.Suspension{sp}})
		wantErr(t, fmt.Sprintf("Save with status %q", st), err, store.ErrInvalid)
		wantState(t, s, "m", want)
	}
	for _, st := range badStatuses {
		got, err := s.ListSuspensions(ctx, store.Filter{Status: st})
		wantErr(t, fmt.Sprintf("ListSuspensions(status %q)", st), err, store.ErrUnknownStatus)
		wantErr(t, fmt.Sprintf("ListSuspensions(status %q)", st), err, store.ErrInvalid)
		if got != nil {
			t.Fatalf("ListSuspensions(status %q) = %v with an error", st, got)
		}
	}
}

// testEvents checks Suspension.Event: kept, selected by Filter.Event
// (with the other fields of the filter), and checked in a save.
func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	ev := func(id, event string, st store.Status) store.Suspension {
		sp := pending(id, t0)
		sp.Event, sp.Status = event, st
		return sp
	}
	mustSave(t, s, store.Save{MachineID: "m1", Suspensions: []store.Suspension{
		ev("a", "ci.passed", store.StatusPending), ev("b", "ci.passed", store.StatusResolved), ev("c", "other", store.StatusPending), ev("d", "", store.StatusPending)}})
	mustSave(t, s, store.Save{MachineID: "m2", Suspensions: []store.Suspension{ev("e", "ci.passed", store.StatusPending)}})
	for _, c := range []struct {
		f    store.Filter
		want []string
	}{
		{store.Filter{Event: "ci.passed"}, []string{"a", "b", "e"}},
		{store.Filter{Event: "ci.passed", Status: store.StatusPending}, []string{"a", "e"}},
		{store.Filter{Event: "ci.passed", MachineID: "m2"}, []string{"e"}},
		{store.Filter{Event: "none"}, nil},
		{store.Filter{Event: "bad\x00"}, nil},
	} {
		got := ids(mustList(t, s, c.f))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Fatalf("ListSuspensions(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	want := stateOf(t, s, "m1")
	_, err := s.Save(ctx, store.Save{MachineID: "m1", Revision: 1, Suspensions: []store.Suspension{ev("x", "bad\x00", store.StatusPending)}})
	wantErr(t, "save with an event that is not a valid ID", err, store.ErrInvalid)
	wantState(t, s, "m1", want)
}
