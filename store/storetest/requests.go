package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/markov-agents/markov/store"
)

// requesterStore is a store that keeps suspend requests.
type requesterStore interface {
	store.Store
	store.SuspendRequester
}

var requesterChecks = []check[requesterStore]{
	{"AddListDrop", testSuspendRequests},
	{"Invalid", testSuspendRequestsInvalid},
	{"DeleteMachine", testSuspendRequestsDelete},
}

func mustRequests(t testing.TB, s store.SuspendRequester, machineID string) []store.SuspendRequest {
	t.Helper()
	got, err := s.SuspendRequests(context.Background(), machineID)
	return must(t, got, err, "SuspendRequests(%q)", machineID)
}

func requestIDs(rs []store.SuspendRequest) []string {
	return idsOf(rs, func(r store.SuspendRequest) string { return r.ID })
}

func testSuspendRequests(t *testing.T, s requesterStore) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1"})
	mustSave(t, s, store.Save{MachineID: "m2"})
	body := []byte(`{"reason":"review"}`)
	for _, r := range []store.SuspendRequest{{ID: "r1", MachineID: "m1", Body: body}, {ID: "r2", MachineID: "m1"}, {ID: "r3", MachineID: "m2"}} {
		if err := s.AddSuspendRequest(ctx, r); err != nil {
			t.Fatalf("AddSuspendRequest(%s): %v", r.ID, err)
		}
	}
	body[0] = 'X' // the store keeps its own copy
	got := mustRequests(t, s, "m1")
	if ids := requestIDs(got); !slices.Equal(ids, []string{"r1", "r2"}) {
		t.Fatalf("SuspendRequests(m1) = %v, want [r1 r2]", ids)
	}
	if string(got[0].Body) != `{"reason":"review"}` || got[0].MachineID != "m1" || got[0].CreatedAt.IsZero() {
		t.Fatalf("SuspendRequests(m1)[0] = %+v", got[0])
	}
	err := s.AddSuspendRequest(ctx, store.SuspendRequest{ID: "r1", MachineID: "m2"})
	wantErr(t, "AddSuspendRequest of a kept ID", err, store.ErrConflict)
	if got := mustRequests(t, s, "nope"); len(got) != 0 {
		t.Fatalf("SuspendRequests(nope) = %v, want none", got)
	}
	for _, id := range []string{"r1", "r1", "unknown"} {
		if err := s.DropSuspendRequest(ctx, "m1", id); err != nil {
			t.Fatalf("DropSuspendRequest(m1, %s): %v", id, err)
		}
	}
	if err := s.DropSuspendRequest(ctx, "m1", "r3"); err != nil {
		t.Fatalf("DropSuspendRequest(m1, r3): %v", err)
	}
	if ids := requestIDs(mustRequests(t, s, "m1")); !slices.Equal(ids, []string{"r2"}) {
		t.Fatalf("SuspendRequests(m1) after drops = %v, want [r2]", ids)
	}
	if ids := requestIDs(mustRequests(t, s, "m2")); !slices.Equal(ids, []string{"r3"}) {
		t.Fatalf("SuspendRequests(m2) = %v, want [r3]: a drop names its machine", ids)
	}
}

func testSuspendRequestsInvalid(t *testing.T, s requesterStore) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m"})
	err := s.AddSuspendRequest(ctx, store.SuspendRequest{ID: "r", MachineID: "missing"})
	wantErr(t, "AddSuspendRequest for a missing machine", err, store.ErrNotFound)
	for _, r := range []store.SuspendRequest{{ID: "", MachineID: "m"}, {ID: "r", MachineID: ""}, {ID: "bad\x00", MachineID: "m"}} {
		err := s.AddSuspendRequest(ctx, r)
		wantErr(t, "AddSuspendRequest of a malformed request", err, store.ErrInvalid)
	}
	if got := mustRequests(t, s, "m"); len(got) != 0 {
		t.Fatalf("SuspendRequests(m) = %v after refused adds, want none", got)
	}
}

func testSuspendRequestsDelete(t *testing.T, s requesterStore) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m"})
	if err := s.AddSuspendRequest(ctx, store.SuspendRequest{ID: "r", MachineID: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if got := mustRequests(t, s, "m"); len(got) != 0 {
		t.Fatalf("SuspendRequests(m) after Delete = %v, want none", got)
	}
	mustSave(t, s, store.Save{MachineID: "m"})
	if err := s.AddSuspendRequest(ctx, store.SuspendRequest{ID: "r", MachineID: "m"}); err != nil {
		t.Fatalf("AddSuspendRequest after Delete: %v", err)
	}
}

// reporterStore is a store whose loads and saves tell whether suspend
// requests are kept.
type reporterStore interface {
	store.Store
	store.RequestReporter
}

var reporterChecks = []check[reporterStore]{
	{"LoadAndSave", testRequestReports},
}

// testRequestReports checks that loads and saves report the machine's own
// requests as kept at the time: none, one, none once dropped.
func testRequestReports(t *testing.T, s reporterStore) {
	ctx := context.Background()
	report := func(when string, rev int64, want bool) int64 {
		t.Helper()
		snap, err := s.Load(ctx, "m1")
		if err != nil {
			t.Fatalf("%s: Load: %v", when, err)
		}
		if snap.SuspendRequests != want {
			t.Fatalf("%s: Load reports requests %v, want %v", when, snap.SuspendRequests, want)
		}
		got, requests, err := s.SaveReporting(ctx, store.Save{MachineID: "m1", Revision: rev})
		if err != nil || got != rev+1 || requests != want {
			t.Fatalf("%s: SaveReporting = %d, %v, %v; want %d, %v", when, got, requests, err, rev+1, want)
		}
		return got
	}
	rev, requests, err := s.SaveReporting(ctx, store.Save{MachineID: "m1"})
	if err != nil || rev != 1 || requests {
		t.Fatalf("SaveReporting of a new machine = %d, %v, %v; want 1, false", rev, requests, err)
	}
	mustSave(t, s, store.Save{MachineID: "m2"})
	if err := s.AddSuspendRequest(ctx, store.SuspendRequest{ID: "r2", MachineID: "m2"}); err != nil {
		t.Fatal(err)
	}
	rev = report("another machine's request", rev, false)
	if err := s.AddSuspendRequest(ctx, store.SuspendRequest{ID: "r1", MachineID: "m1"}); err != nil {
		t.Fatal(err)
	}
	rev = report("a request kept", rev, true)
	if err := s.DropSuspendRequest(ctx, "m1", "r1"); err != nil {
		t.Fatal(err)
	}
	report("the request dropped", rev, false)
	_, _, err = s.SaveReporting(ctx, store.Save{MachineID: "m1", Revision: 1})
	wantErr(t, "SaveReporting at a stale revision", err, store.ErrConflict)
}
