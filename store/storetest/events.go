package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/markov-agents/markov/store"
)

// logStore is a store that keeps an event log.
type logStore interface {
	store.Store
	store.EventLog
}

var eventLogChecks = []check[logStore]{
	{"AppendAndRead", testEventsAppend},
	{"AtomicWithSave", testEventsAtomic},
	{"Feed", testSuspensionFeed},
	{"FeedMachineChanges", testFeedMachineChanges},
	{"DeletedWithMachine", testEventsDeleted},
	{"SeqsOutliveDelete", testSeqsOutliveDelete},
	{"LoadedEventSeq", testLoadedEventSeq},
	{"Notify", testEventsNotify},
	{"Publish", testPublish},
	{"PublishInvalid", testPublishInvalid},
}

// readAll reads machineID's log after afterSeq.
func readAll(t testing.TB, s store.EventLog, machineID string, afterSeq int64, limit int) []string {
	t.Helper()
	evs, err := s.ReadEvents(context.Background(), machineID, afterSeq, limit)
	if err != nil {
		t.Fatalf("ReadEvents(%q, %d): %v", machineID, afterSeq, err)
	}
	var out []string
	for i, e := range evs {
		if e.Seq != afterSeq+int64(i)+1 {
			t.Fatalf("ReadEvents(%q, %d): entry %d has Seq %d", machineID, afterSeq, i, e.Seq)
		}
		out = append(out, string(e.Data))
	}
	return out
}

func wantStrings(t testing.TB, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

func testEventsAppend(t *testing.T, s logStore) {
	rev := mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Events: bs("a", "b")})
	mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Events: bs("c")})
	mustSave(t, s, store.Save{MachineID: "m2", Tree: []byte("t"), Events: bs("x")})
	wantStrings(t, "m1 log", readAll(t, s, "m1", 0, 0), "a", "b", "c")
	wantStrings(t, "m1 log after 1", readAll(t, s, "m1", 1, 0), "b", "c")
	wantStrings(t, "m1 log after 1, limit 1", readAll(t, s, "m1", 1, 1), "b")
	wantStrings(t, "m1 log after 3", readAll(t, s, "m1", 3, 0))
	wantStrings(t, "m2 log", readAll(t, s, "m2", 0, 0), "x")
	wantStrings(t, "unknown machine", readAll(t, s, "nope", 0, 0))
	wantStrings(t, "malformed ID", readAll(t, s, "", 0, 0))
}

func testEventsAtomic(t *testing.T, s logStore) {
	rev := mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Events: bs("a")})
	_, err := s.Save(context.Background(), store.Save{MachineID: "m1", Revision: rev + 5, Tree: []byte("u"), Events: bs("lost")})
	wantErr(t, "stale save", err, store.ErrConflict)
	wantStrings(t, "log after a failed save", readAll(t, s, "m1", 0, 0), "a")
}

func testSuspensionFeed(t *testing.T, s logStore) {
	ctx := context.Background()
	rev := mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Suspensions: []store.Suspension{pending("s1", time.Time{})}})
	// Unchanged: no new change.
	rev = mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Suspensions: []store.Suspension{pending("s1", time.Time{})}})
	done := pending("s1", time.Time{})
	done.Status = store.StatusResolved
	mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Suspensions: []store.Suspension{done, pending("s2", t0)}})
	changes, err := s.ReadSuspensionChanges(ctx, 0, 0)
	if err != nil {
		t.Fatalf("ReadSuspensionChanges: %v", err)
	}
	var got []string
	for i, c := range changes {
		if i > 0 && c.Cursor <= changes[i-1].Cursor {
			t.Fatalf("cursors not increasing: %d after %d", c.Cursor, changes[i-1].Cursor)
		}
		if c.Suspension.MachineID != "m1" || c.Suspension.Name != "approve" {
			t.Fatalf("change %d: %+v", i, c.Suspension)
		}
		got = append(got, c.Suspension.ID+":"+string(c.Suspension.Status))
	}
	wantStrings(t, "feed", got, "s1:pending", "s1:resolved", "s2:pending")
	if !changes[2].Suspension.Deadline.Equal(norm(t0)) {
		t.Fatalf("feed deadline = %v, want %v", changes[2].Suspension.Deadline, norm(t0))
	}
	rest, err := s.ReadSuspensionChanges(ctx, changes[0].Cursor, 1)
	if err != nil || len(rest) != 1 || rest[0].Cursor != changes[1].Cursor {
		t.Fatalf("ReadSuspensionChanges(after %d, limit 1) = %+v, %v", changes[0].Cursor, rest, err)
	}
}

func testEventsDeleted(t *testing.T, s logStore) {
	ctx := context.Background()
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Events: bs("a"), Suspensions: []store.Suspension{pending("s1", time.Time{})}})
	mustSave(t, s, store.Save{MachineID: "m2", Tree: []byte("t"), Events: bs("b"), Suspensions: []store.Suspension{pending("s2", time.Time{})}})
	if err := s.Delete(ctx, "m1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantStrings(t, "deleted machine's log", readAll(t, s, "m1", 0, 0))
	wantStrings(t, "other machine's log", readAll(t, s, "m2", 0, 0), "b")
	changes, err := s.ReadSuspensionChanges(ctx, 0, 0)
	if err != nil || len(changes) != 1 || changes[0].Suspension.ID != "s2" {
		t.Fatalf("feed after Delete = %+v, %v; want s2's change only", changes, err)
	}
	// A new machine of the same ID starts a new log, after the old one.
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Events: bs("new")})
	wantStrings(t, "recreated machine's log", readAll(t, s, "m1", 1, 0), "new")
}

// testSeqsOutliveDelete: the sequence numbers of a machine ID never
// repeat, however often its machine is deleted and created again.
func testSeqsOutliveDelete(t *testing.T, s logStore) {
	rev := mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Events: bs("a", "b", "c")})
	mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Events: bs("d")})
	mustSave(t, s, store.Save{MachineID: "m2", Tree: []byte("t"), Events: bs("x")})
	CheckLogAcrossDelete(t, s, "m1", 4)
	wantStrings(t, "other machine's log", readAll(t, s, "m2", 0, 0), "x")
}

// CheckLogAcrossDelete checks the promise of [store.EventLog] that
// sequence numbers never repeat for a machine ID, on machine id of s,
// whose event log ends at last (> 0). It deletes the machine and creates
// it again, more than once, and checks that each new machine logs after
// the last sequence number of every log deleted before — that a reader
// at last reads the new machine's events — and that a load of a new
// machine that has logged nothing reports that number as EventSeq. A
// store's tests call it on a machine of a database an older version
// wrote, after an upgrade; [Run] calls it on a machine it logged.
func CheckLogAcrossDelete(t testing.TB, s interface {
	store.Snapshots
	store.EventLog
}, id string, last int64) {
	t.Helper()
	ctx := context.Background()
	del := func() {
		t.Helper()
		if err := s.Delete(ctx, id); err != nil {
			t.Fatalf("Delete(%q): %v", id, err)
		}
		if got := readSeqs(t, s, id, 0); len(got) > 0 {
			t.Fatalf("the log of deleted machine %q holds %v", id, got)
		}
	}
	del()
	// Created again, it has logged nothing: a load is at the old end.
	mustSave(t, s, store.Save{MachineID: id, Tree: []byte("t")})
	wantFloor(t, s, id, last)
	// A delete of a machine that logged nothing keeps the floor.
	del()
	rev := mustSave(t, s, store.Save{MachineID: id, Tree: []byte("t"), Append: bs("h")})
	wantFloor(t, s, id, last)
	// Its events come after the old ones, and a reader at the old end
	// reads them all.
	mustSave(t, s, store.Save{MachineID: id, Revision: rev, Tree: []byte("t"), Events: bs("again1", "again2")})
	wantStrings(t, "the log after the old end", readSeqs(t, s, id, last), fmt.Sprint(last+1, ":again1"), fmt.Sprint(last+2, ":again2"))
	wantStrings(t, "the whole log", readSeqs(t, s, id, 0), fmt.Sprint(last+1, ":again1"), fmt.Sprint(last+2, ":again2"))
	if got := mustLoad(t, s, id).EventSeq; got != last+2 {
		t.Fatalf("Load(%q).EventSeq = %d, want %d", id, got, last+2)
	}
	// Once more, with events in the save that creates the machine.
	del()
	mustSave(t, s, store.Save{MachineID: id, Tree: []byte("t"), Events: bs("third")})
	wantStrings(t, "the third machine's log", readSeqs(t, s, id, last), fmt.Sprint(last+3, ":third"))
}

// readSeqs reads machineID's log after afterSeq as "seq:data" strings.
func readSeqs(t testing.TB, s store.EventLog, machineID string, afterSeq int64) []string {
	t.Helper()
	evs, err := s.ReadEvents(context.Background(), machineID, afterSeq, 0)
	if err != nil {
		t.Fatalf("ReadEvents(%q, %d): %v", machineID, afterSeq, err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprint(e.Seq, ":", string(e.Data))
	}
	return out
}

// wantFloor checks that machine id has logged nothing, and that its
// loads report floor as EventSeq.
func wantFloor(t testing.TB, s interface {
	store.Snapshots
	store.EventLog
}, id string, floor int64) {
	t.Helper()
	if got := readSeqs(t, s, id, 0); len(got) > 0 {
		t.Fatalf("the log of %q holds %v, want none", id, got)
	}
	wantLoadedSeq(t, s, id, floor, "the deleted log's last")
}

// lastSeq is the Seq of the last entry of machineID's log, 0 if it has
// none.
func lastSeq(t testing.TB, s store.EventLog, machineID string) int64 {
	t.Helper()
	evs, err := s.ReadEvents(context.Background(), machineID, 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents(%q): %v", machineID, err)
	}
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// wantEventSeq checks that a load of machineID (and a load of its tail,
// when s is a store.TailLoader) reports the last entry of its log, want.
func wantEventSeq(t testing.TB, s logStore, machineID string, want int64) {
	t.Helper()
	if got := lastSeq(t, s, machineID); got != want {
		t.Fatalf("the last entry of %q's log has Seq %d, want %d", machineID, got, want)
	}
	wantLoadedSeq(t, s, machineID, want, "the last entry's Seq")
}

// wantLoadedSeq checks that a load of machineID (and a load of its tail,
// when s is a store.TailLoader) reports want as EventSeq, which is what
// says.
func wantLoadedSeq(t testing.TB, s store.Snapshots, machineID string, want int64, what string) {
	t.Helper()
	if got := mustLoad(t, s, machineID).EventSeq; got != want {
		t.Fatalf("Load(%q).EventSeq = %d, want %d (%s)", machineID, got, want, what)
	}
	if tl, ok := s.(store.TailLoader); ok {
		snap, err := tl.LoadTail(context.Background(), machineID, 1)
		if err != nil {
			t.Fatalf("LoadTail(%q, 1): %v", machineID, err)
		}
		if snap.EventSeq != want {
			t.Fatalf("LoadTail(%q, 1).EventSeq = %d, want %d (%s)", machineID, snap.EventSeq, want, what)
		}
	}
}

// testLoadedEventSeq: a load reports the Seq of the last entry of the
// machine's log as it stood, 0 for a log without entries.
func testLoadedEventSeq(t *testing.T, s logStore) {
	rev := mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Append: bs("h")})
	wantEventSeq(t, s, "m1", 0)
	rev = mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Events: bs("a", "b")})
	wantEventSeq(t, s, "m1", 2)
	rev = mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Append: bs("i")})
	wantEventSeq(t, s, "m1", 2)
	_, err := s.Save(context.Background(), store.Save{MachineID: "m1", Revision: rev + 5, Tree: []byte("u"), Events: bs("lost")})
	wantErr(t, "stale save", err, store.ErrConflict)
	wantEventSeq(t, s, "m1", 2)
	mustSave(t, s, store.Save{MachineID: "m2", Tree: []byte("t"), Events: bs("x")})
	wantEventSeq(t, s, "m2", 1)
	mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Events: bs("c")})
	wantEventSeq(t, s, "m1", 3)
	// A machine created again is at the end of the deleted log.
	if err := s.Delete(context.Background(), "m1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t")})
	wantFloor(t, s, "m1", 3)
	wantEventSeq(t, s, "m2", 1)
}

// next waits for a notice, failing after a while.
func next(t testing.TB, sub store.Subscription) store.Notice {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return n
}

func subscribe(t testing.TB, s store.EventLog, machineID string) store.Subscription {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), machineID)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", machineID, err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

func testEventsNotify(t *testing.T, s logStore) {
	sub := subscribe(t, s, "m1")
	feed := subscribe(t, s, "")
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Events: bs("a"), Suspensions: []store.Suspension{pending("s1", time.Time{})}})
	for !next(t, sub).Appended {
	}
	wantStrings(t, "log after a notice", readAll(t, s, "m1", 0, 0), "a")
	for !next(t, feed).Appended {
	}
	// A cancelled wait ends with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
}

func testPublish(t *testing.T, s logStore) {
	mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t")})
	sub := subscribe(t, s, "m1")
	other := subscribe(t, s, "m2")
	big := strings.Repeat("é", store.MaxLivePayload/2)
	if err := s.Publish(context.Background(), "m1", bs("one", "two", big)); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	var got []string
	for len(got) < 3 {
		got = append(got, strs(next(t, sub).Live)...)
	}
	wantStrings(t, "live payloads", got, "one", "two", big)
	wantStrings(t, "log after Publish", readAll(t, s, "m1", 0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if n, err := other.Next(ctx); err == nil && len(n.Live) > 0 {
		t.Fatalf("another machine's subscription got %q", n.Live)
	}
}

func testPublishInvalid(t *testing.T, s logStore) {
	ctx := context.Background()
	for name, p := range map[string][]byte{
		"too long":  []byte(strings.Repeat("x", store.MaxLivePayload+1)),
		"not UTF-8": {0xff, 0xfe},
		"NUL":       []byte("a\x00b"),
	} {
		if err := s.Publish(ctx, "m1", [][]byte{[]byte("ok"), p}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Publish %s: %v, want ErrInvalid", name, err)
		}
	}
	if err := s.Publish(ctx, "", bs("x")); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Publish to an empty machine ID: %v, want ErrInvalid", err)
	}
}

// testFeedMachineChanges checks the machine changes of the feed: a save
// with Finish adds a finished change after its suspension changes, woken
// watchers of the feed, and — on a store that is a store.Parker — a park
// adds a parked change with the errors at the revision.
func testFeedMachineChanges(t *testing.T, s logStore) {
	ctx := context.Background()
	feed := subscribe(t, s, "")
	rev := mustSave(t, s, store.Save{MachineID: "m1", Tree: []byte("t"), Suspensions: []store.Suspension{pending("s1", time.Time{})}})
	for !next(t, feed).Appended {
	}
	done := pending("s1", time.Time{})
	done.Status = store.StatusResolved
	rev = mustSave(t, s, store.Save{MachineID: "m1", Revision: rev, Tree: []byte("t"), Suspensions: []store.Suspension{done},
		Finish: &store.Finish{Answer: "all done ✓\x00"}})
	for !next(t, feed).Appended {
	}
	mustSave(t, s, store.Save{MachineID: "m2", Tree: []byte("t")}) // no change
	changes, err := s.ReadSuspensionChanges(ctx, 0, 0)
	if err != nil || len(changes) != 3 {
		t.Fatalf("ReadSuspensionChanges = %+v, %v; want 3 changes", changes, err)
	}
	if changes[1].Machine != nil || changes[1].Suspension.Status != store.StatusResolved {
		t.Fatalf("change 2 = %+v, want s1 resolved", changes[1])
	}
	fin := changes[2]
	want := store.MachineChange{Event: store.MachineFinished, Revision: rev, Answer: "all done ✓\x00"}
	if fin.Machine == nil || fmt.Sprint(*fin.Machine) != fmt.Sprint(want) || fin.Suspension.MachineID != "m1" || fin.Suspension.ID != "" || fin.At.IsZero() {
		t.Fatalf("finished change = %+v (machine %+v), want %+v of m1", fin, fin.Machine, want)
	}
	p, ok := s.(store.Parker)
	if !ok {
		return
	}
	at := time.Now()
	for _, reason := range []string{"boom 1", "boom 2"} {
		if err := p.Park(ctx, "m1", reason, at); err != nil {
			t.Fatalf("Park: %v", err)
		}
		for !next(t, feed).Appended {
		}
	}
	if err := p.Park(ctx, "nope", "x", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Park of an unknown machine = %v, want ErrNotFound", err)
	}
	parked, err := s.ReadSuspensionChanges(ctx, fin.Cursor, 0)
	if err != nil || len(parked) != 2 {
		t.Fatalf("ReadSuspensionChanges after the parks = %+v, %v; want 2 changes", parked, err)
	}
	for i, c := range parked {
		want := store.MachineChange{Event: store.MachineParked, Revision: rev, Errors: []string{"boom 1", "boom 2"}[:i+1]}
		if c.Machine == nil || fmt.Sprint(*c.Machine) != fmt.Sprint(want) || c.Suspension.MachineID != "m1" {
			t.Fatalf("parked change %d = %+v (machine %+v), want %+v", i, c, c.Machine, want)
		}
	}
}
