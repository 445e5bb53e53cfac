// Package storetest is the conformance suite for store implementations.
// Each interface of package store has its own checks, and a store gets the
// checks of exactly the interfaces it implements: [Run] checks a
// [store.Store] (snapshots and the suspension index) and then each optional
// capability the store offers ([store.MachineLister],
// [store.ExpiryClaimer], [store.ReplayGuard], [store.SuspendRequester],
// [store.RequestReporter], [store.EventLog], [store.TailLoader],
// [store.EffectJournal], [store.TxEffectJournal], [store.RecordKeeper],
// [store.AuditLog], [store.RuleUses]), discovered by type assertion as
// callers discover them. [RunSnapshots] checks a back end that only keeps
// snapshots. An implementation's tests call Run with a constructor of
// empty stores, and its benchmarks call [BenchmarkSave]:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
//	}
//
// A store whose type has a Close() error method is closed when each check
// ends. [CheckLogAcrossDelete] is a check to run on a database an older
// version of a store wrote, after its upgrade.
package storetest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/markov-agents/markov/store"
)

// check is one named conformance check of a store of type S.
type check[S any] struct {
	name string
	fn   func(t *testing.T, s S)
}

// runChecks runs each check as a subtest of a subtest named group, on a
// fresh store from newStore, closing it when the check ends (after that,
// newStore's own cleanups, such as dropping a database, run).
func runChecks[S any](t *testing.T, group string, newStore func(t *testing.T) S, checks []check[S]) {
	t.Helper()
	t.Run(group, func(t *testing.T) {
		for _, c := range checks {
			t.Run(c.name, func(t *testing.T) {
				s := newStore(t)
				if cl, ok := any(s).(io.Closer); ok {
					t.Cleanup(func() {
						if err := cl.Close(); err != nil {
							t.Errorf("Close: %v", err)
						}
					})
				}
				c.fn(t, s)
			})
		}
	})
}

// as adapts a constructor of stores to one of S, which the stores are
// known to implement.
func as[S any](newStore func(t *testing.T) store.Store) func(t *testing.T) S {
	return func(t *testing.T) S { return newStore(t).(S) }
}

// Run checks the stores newStore makes: the [store.Snapshots] and
// [store.Index] checks, then the checks of each optional capability the
// stores implement. newStore is called once per check and must return an
// empty store (and once more, first, to learn the capabilities).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	probe := newStore(t)
	if cl, ok := probe.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	RunSnapshots(t, func(t *testing.T) store.Snapshots { return newStore(t) })
	runChecks(t, "Index", newStore, indexChecks)
	if _, ok := probe.(store.MachineLister); ok {
		runChecks(t, "MachineLister", as[listerStore](newStore), listerChecks)
	}
	if _, ok := probe.(store.ExpiryClaimer); ok {
		runChecks(t, "ExpiryClaimer", as[claimerStore](newStore), claimerChecks)
	}
	if _, ok := probe.(store.ReplayGuard); ok {
		runChecks(t, "ReplayGuard", as[store.ReplayGuard](newStore), replayChecks)
	}
	if _, ok := probe.(store.SuspendRequester); ok {
		runChecks(t, "SuspendRequester", as[requesterStore](newStore), requesterChecks)
	}
	if _, ok := probe.(store.RequestReporter); ok {
		runChecks(t, "RequestReporter", as[reporterStore](newStore), reporterChecks)
	}
	if _, ok := probe.(store.EventLog); ok {
		runChecks(t, "EventLog", as[logStore](newStore), eventLogChecks)
	}
	if _, ok := probe.(store.TailLoader); ok {
		runChecks(t, "TailLoader", as[tailStore](newStore), tailChecks)
	}
	if _, ok := probe.(store.EffectJournal); ok {
		runChecks(t, "EffectJournal", as[store.EffectJournal](newStore), effectChecks)
	}
	if _, ok := probe.(txJournal); ok {
		runChecks(t, "TxEffectJournal", as[txJournal](newStore), txEffectChecks)
	}
	if _, ok := probe.(store.RecordKeeper); ok {
		runChecks(t, "RecordKeeper", as[store.RecordKeeper](newStore), recordChecks)
	}
	if _, ok := probe.(store.AuditLog); ok {
		runChecks(t, "AuditLog", as[auditStore](newStore), auditChecks)
	}
	if _, ok := probe.(store.RuleUses); ok {
		runChecks(t, "RuleUses", as[store.RuleUses](newStore), ruleChecks)
	}
}

// RunSnapshots checks the [store.Snapshots] newStore makes: revisions,
// conflicts, history, deletion. It is part of [Run]; call it alone for a
// back end that keeps snapshots only. When the stores also implement
// [store.Index], the checks that nothing changed include the index.
func RunSnapshots(t *testing.T, newStore func(t *testing.T) store.Snapshots) {
	t.Helper()
	runChecks(t, "Snapshots", newStore, snapshotChecks)
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

func mustSave(t testing.TB, s store.Snapshots, sv store.Save) int64 {
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

func mustLoad(t testing.TB, s store.Snapshots, id string) *store.Snapshot {
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

func mustList(t testing.TB, s store.Index, f store.Filter) []store.Suspension {
	t.Helper()
	got, err := s.ListSuspensions(context.Background(), f)
	return must(t, got, err, "ListSuspensions(%+v)", f)
}

// must returns v, failing t if err (from the call format and args name)
// is not nil.
func must[T any](t testing.TB, v T, err error, format string, args ...any) T {
	t.Helper()
	if err != nil {
		t.Fatalf(format+": %v", append(args, err)...)
	}
	return v
}

func ids(ss []store.Suspension) []string {
	return idsOf(ss, func(s store.Suspension) string { return s.ID })
}

// idsOf returns the ID of each element of s, which id reads.
func idsOf[T any](s []T, id func(T) string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = id(v)
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

// stateOf reads machine id back; its suspensions only when s is also an
// [store.Index].
func stateOf(t testing.TB, s store.Snapshots, id string) state {
	t.Helper()
	snap := mustLoad(t, s, id)
	st := state{Revision: snap.Revision, Tree: string(snap.Tree), History: strs(snap.History)}
	if ix, ok := s.(store.Index); ok {
		st.Suspensions = mustList(t, ix, store.Filter{MachineID: id})
	}
	return st
}

// wantNoSuspension checks that suspendID is not in the index, when s has
// one.
func wantNoSuspension(t testing.TB, s store.Snapshots, suspendID string) {
	t.Helper()
	if ix, ok := s.(store.Index); ok {
		_, err := ix.FindSuspension(context.Background(), suspendID)
		wantErr(t, "FindSuspension("+suspendID+")", err, store.ErrNotFound)
	}
}

func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error = %v, want %v", what, err, target)
	}
}

func wantState(t testing.TB, s store.Snapshots, id string, want state) {
	t.Helper()
	if _, ok := s.(store.Index); !ok {
		want.Suspensions = nil
	}
	if diff := cmp.Diff(want, stateOf(t, s, id), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("machine %q changed (-want +got):\n%s", id, diff)
	}
}

func pending(id string, deadline time.Time) store.Suspension {
	return store.Suspension{ID: id, Status: store.StatusPending, Kind: "tool", Name: "approve", Reason: "needs a human", Deadline: deadline, CreatedAt: t0}
}
