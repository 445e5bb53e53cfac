package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/markov-agents/markov/store"
)

// listerStore is a store that lists its machines.
type listerStore interface {
	store.Store
	store.MachineLister
}

var listerChecks = []check[listerStore]{
	{"ListMachines", testListMachines},
}

// claimerStore is a store that leases expired suspensions.
type claimerStore interface {
	store.Store
	store.ExpiryClaimer
}

var claimerChecks = []check[claimerStore]{
	{"NotFound", testClaimNothing},
	{"Invalid", testClaimInvalid},
	{"Claim", testClaim},
	{"ClaimKeptBySave", testClaimKeptBySave},
	{"ClaimReminder", testClaimReminder},
	{"ClaimConcurrent", testClaimConcurrent},
}

func testListMachines(t *testing.T, s listerStore) {
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
	if err := s.Delete(ctx, "c"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	got, err = s.ListMachines(ctx)
	if err != nil || !slices.Equal(got, []string{"a", "b", "c/1"}) {
		t.Fatalf("ListMachines after Delete = %v, %v; want [a b c/1]", got, err)
	}
}

func claim(t testing.TB, s store.ExpiryClaimer, now time.Time, limit int, lease time.Duration) []store.Suspension {
	t.Helper()
	got, err := s.ClaimExpired(context.Background(), now, limit, lease)
	return must(t, got, err, "ClaimExpired(%v, %d, %v)", now, limit, lease)
}

func testClaim(t *testing.T, s claimerStore) {
	ctx := context.Background()
	now, lease := t0, time.Minute
	resolved := pending("r1", now.Add(-3*time.Hour))
	resolved.Status = store.StatusResolved
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
	testClaimLeases(t, s, now, lease)
}

// testClaimLeases goes on from testClaim's claims at now: p1, p2 and p3
// are leased until now+lease, p4's deadline is a second after now.
func testClaimLeases(t *testing.T, s claimerStore, now time.Time, lease time.Duration) {
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

func testClaimKeptBySave(t *testing.T, s claimerStore) {
	now, lease := t0, time.Minute
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: []store.Suspension{pending("p1", now), pending("p2", now)}})
	if got := claim(t, s, now, 1, lease); !slices.Equal(ids(got), []string{"p1"}) {
		t.Fatalf("claim = %v, want [p1]", ids(got))
	}
	// Another step of the machine keeps p1 pending (and leased) and resolves p2.
	p2 := pending("p2", now)
	p2.Status = store.StatusResolved
	mustSave(t, s, store.Save{MachineID: "m", Revision: 1, Suspensions: []store.Suspension{pending("p1", now), p2}})
	if got := claim(t, s, now.Add(time.Second), 0, lease); len(got) != 0 {
		t.Fatalf("claim after save = %v, want none (p1 leased, p2 resolved)", ids(got))
	}
	if got := claim(t, s, now.Add(lease), 0, lease); !slices.Equal(ids(got), []string{"p1"}) {
		t.Fatalf("claim after lease = %v, want [p1]", ids(got))
	}
}

// testClaimReminder: a pending suspension whose reminder is due
// (Suspension.RemindAt) is handed out as an expired one is, whatever its
// deadline; RemindAt is kept as saved, apart from the deadline; a
// reminder to come, or on a suspension no longer pending, is not.
func testClaimReminder(t *testing.T, s claimerStore) {
	ctx := context.Background()
	now, lease := t0, time.Minute
	withRemind := func(sp store.Suspension, at time.Time) store.Suspension { sp.RemindAt = at; return sp }
	done := withRemind(pending("r-done", time.Time{}), now.Add(-time.Hour))
	done.Status = store.StatusResolved
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: []store.Suspension{
		withRemind(pending("r-due", now.Add(time.Hour)), now.Add(-time.Minute)), // deadline to come
		withRemind(pending("r-bare", time.Time{}), now),                         // no deadline
		withRemind(pending("r-later", now.Add(time.Hour)), now.Add(time.Second)),
		done,
	}})
	f, err := s.FindSuspension(ctx, "r-due")
	if err != nil || !f.RemindAt.Equal(norm(now.Add(-time.Minute))) || !f.Deadline.Equal(norm(now.Add(time.Hour))) {
		t.Fatalf("FindSuspension(r-due) = %+v, %v; want RemindAt %v, Deadline %v", f, err, now.Add(-time.Minute), now.Add(time.Hour))
	}
	if got := claim(t, s, now, 0, lease); !slices.Equal(ids(got), []string{"r-due", "r-bare"}) {
		t.Fatalf("claim = %v, want [r-due r-bare]", ids(got))
	}
	if got := claim(t, s, now.Add(time.Second), 0, lease); !slices.Equal(ids(got), []string{"r-later"}) {
		t.Fatalf("claim a second later = %v, want [r-later]", ids(got))
	}
}

func testClaimConcurrent(t *testing.T, s claimerStore) {
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

func testClaimNothing(t *testing.T, s claimerStore) {
	if got := claim(t, s, t0, 10, time.Minute); len(got) != 0 {
		t.Fatalf("ClaimExpired on empty store = %v", got)
	}
}

func testClaimInvalid(t *testing.T, s claimerStore) {
	mustSave(t, s, store.Save{MachineID: "m", Suspensions: []store.Suspension{pending("p", t0)}})
	for _, lease := range []time.Duration{0, -time.Second} {
		_, err := s.ClaimExpired(context.Background(), t0, 1, lease)
		wantErr(t, fmt.Sprintf("ClaimExpired with lease %v", lease), err, store.ErrInvalid)
	}
	if got := claim(t, s, t0, 0, time.Minute); !slices.Equal(ids(got), []string{"p"}) {
		t.Fatalf("claim after refused claims = %v, want [p]", ids(got))
	}
}
