package durable_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// chattyText is the final answer of the chatty model: long enough to
// stream in many chunks.
const chattyText = "All done: the work is finished, approved, and written down — merci beaucoup."

// chattyModel says something before each call: a work call, the approval
// call, then chattyText, streamed in chunks of 5 runes with latency
// between them.
func chattyModel(latency time.Duration) llm.Model {
	return scripted.New(
		scripted.Reply{Text: "working", Calls: []scripted.Call{{ID: "w1", Name: "work", Input: empty{}}}},
		scripted.Reply{Thinking: "should ask", Signature: "sig", Calls: []scripted.Call{{ID: "a1", Name: "ask", Input: empty{}}}},
		scripted.Reply{Text: chattyText},
	).Configure(scripted.Config{ChunkSize: 5, ChunkLatency: latency})
}

// watchUntilDone collects w's events until a Done step has come after
// the resume (the second Done step), then stops.
func watchUntilDone(t testing.TB, w func(yield func(durable.Event, error) bool), dones int) []durable.Event {
	t.Helper()
	var out []durable.Event
	for e, err := range w {
		require.NoError(t, err)
		out = append(out, e)
		if e.Kind == machine.EventStep && e.Step.Done {
			if dones--; dones == 0 {
				break
			}
		}
	}
	return out
}

// checkWatched checks a watcher's events: sequence numbers increase by one
// from after+1, and the text deltas add up to each block's text once.
func checkWatched(t testing.TB, events []durable.Event, after int64) string {
	t.Helper()
	var text strings.Builder
	seq := after
	for _, e := range events {
		if !e.Live {
			require.Equal(t, seq+1, e.Seq, "log events come in order, without gaps or duplicates")
			seq = e.Seq
		}
		if e.Kind == machine.EventTextDelta {
			text.WriteString(e.Text)
		}
	}
	return text.String()
}

func kinds(events []durable.Event) map[machine.EventKind]int {
	out := map[machine.EventKind]int{}
	for _, e := range events {
		if !e.Live && !e.Echo {
			out[e.Kind]++
		}
	}
	return out
}

// resumed returns a runner on s driven by model that has run machine id
// until it suspended (see suspended) and resumed it with "approved", and
// the suspend ID.
func resumed(t *testing.T, s store.Store, model llm.Model, id string) (*durable.Runner, string) {
	t.Helper()
	r := newRunner(t, s, model)
	suspendID := suspended(t, r, id)
	_, err := runSteps(r.Resume(context.Background(), machine.ResumeInput{SuspendID: suspendID, Payload: "approved"}))
	require.NoError(t, err)
	return r, suspendID
}

func TestWatchReplaysTheLogAndResumesFromASequenceNumber(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r, id := resumed(t, s, chattyModel(0), "m1")

		all := watchUntilDone(t, r.Watch(ctx, "m1", 0), 2)
		require.Equal(t, "working"+chattyText, checkWatched(t, all, 0))
		k := kinds(all)
		require.Equal(t, 2, k[machine.EventTextDelta], "one coalesced delta per block")
		require.Equal(t, 1, k[machine.EventThinkingDelta])
		require.Equal(t, 2, k[machine.EventToolStarted])
		require.Equal(t, 2, k[machine.EventToolFinished])
		require.Equal(t, 1, k[machine.EventSuspended])
		require.Equal(t, 1, k[machine.EventResumed])
		require.Positive(t, k[machine.EventStateChanged])
		for _, e := range all {
			require.False(t, e.Live)
			if e.Kind == machine.EventSuspended {
				require.Equal(t, id, e.Call.SuspendID)
			}
			if e.Kind == machine.EventStep {
				require.NotEqual(t, machine.Replied, e.Step.Reason, "checkpoints are not logged as steps")
			}
		}

		// Reconnect after the suspension: exactly the rest.
		var cut int
		for i, e := range all {
			if e.Kind == machine.EventStep && e.Step.Done {
				cut = i + 1
				break
			}
		}
		rest := watchUntilDone(t, r.Watch(ctx, "m1", all[cut-1].Seq), 1)
		require.Equal(t, all[cut:], rest)
	})
}

func TestWatchReceivesLiveDeltasOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r := newRunner(t, s, chattyModel(2*time.Millisecond))
		id := suspended(t, r, "m1")
		got := make(chan []durable.Event)
		ready := make(chan struct{})
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			var out []durable.Event
			for e, err := range r.Watch(wctx, "m1", 0) {
				if err != nil {
					break
				}
				out = append(out, e)
				if e.Kind == machine.EventSuspended {
					close(ready)
				}
				if e.Kind == machine.EventStep && e.Step.Done && len(out) > 0 && e.Seq > 0 && hasResumed(out) {
					break
				}
			}
			got <- out
		}()
		<-ready // the watcher is subscribed and has read the log
		_, err := runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"}))
		require.NoError(t, err)
		events := <-got
		require.Equal(t, "working"+chattyText, checkWatched(t, events, 0))
		live := 0
		for _, e := range events {
			if e.Live && e.Kind == machine.EventTextDelta {
				live++
			}
		}
		require.Greater(t, live, 1, "the final answer streams live, in several deltas")
	})
}

func hasResumed(events []durable.Event) bool {
	for _, e := range events {
		if e.Kind == machine.EventResumed {
			return true
		}
	}
	return false
}

func TestWatchSuspensionsFeedsEveryLifecycleChange(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r, id := resumed(t, s, agentModel(0), "m1")
		id2 := suspended(t, r, "m2")
		_, err := runSteps(r.Cancel(ctx, machine.CancelInput{SuspendID: id2, Reason: "no"}))
		require.NoError(t, err)

		var got []store.SuspensionChange
		for c, err := range r.WatchSuspensions(ctx, 0) {
			require.NoError(t, err)
			got = append(got, c)
			if len(got) == 4 {
				break
			}
		}
		want := []struct {
			id     string
			status store.Status
		}{{id, store.StatusPending}, {id, store.StatusResolved}, {id2, store.StatusPending}, {id2, store.StatusCancelled}}
		for i, w := range want {
			require.Equal(t, w.id, got[i].Suspension.ID)
			require.Equal(t, w.status, got[i].Suspension.Status)
			if i > 0 {
				require.Greater(t, got[i].Cursor, got[i-1].Cursor)
			}
		}
		// From a cursor: the rest only.
		for c, err := range r.WatchSuspensions(ctx, got[2].Cursor) {
			require.NoError(t, err)
			require.Equal(t, got[3], c)
			break
		}
		// Deleting a machine deletes its log and its changes.
		require.NoError(t, r.Delete(ctx, "m1"))
		for c, err := range r.WatchSuspensions(ctx, 0) {
			require.NoError(t, err)
			require.Equal(t, "m2", c.Suspension.MachineID)
			break
		}
		l := any(r).(interface{ CanWatch() bool })
		require.True(t, l.CanWatch())
	})
}

// TestLoadAtIsWhereTheWatchGoesOn: LoadAt and Status report the last
// entry of the machine's event log at the load, and a watch from there
// yields what happened after the load only — the resume — and none of
// the events the loaded machine already shows.
func TestLoadAtIsWhereTheWatchGoesOn(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r := newRunner(t, s, chattyModel(0))
		_, err := r.Create(ctx, "fresh", "desk", nil)
		require.NoError(t, err)
		fresh, err := r.LoadAt(ctx, "fresh")
		require.NoError(t, err)
		require.Zero(t, fresh.EventSeq, "a machine that never ran has logged nothing")

		id := suspended(t, r, "m1")
		logged, err := s.(store.EventLog).ReadEvents(ctx, "m1", 0, 0)
		require.NoError(t, err)
		require.NotEmpty(t, logged)
		last := logged[len(logged)-1].Seq
		l, err := r.LoadAt(ctx, "m1")
		require.NoError(t, err)
		require.Equal(t, last, l.EventSeq)
		_, rev, err := r.Load(ctx, "m1")
		require.NoError(t, err)
		require.Equal(t, rev, l.Revision)
		require.Len(t, l.Machine.Pending(), 1)
		st, err := r.Status(ctx, "m1")
		require.NoError(t, err)
		require.Equal(t, last, st.EventSeq)

		_, err = runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"}))
		require.NoError(t, err)
		after := watchUntilDone(t, r.Watch(ctx, "m1", l.EventSeq), 1)
		require.Equal(t, l.EventSeq+1, after[0].Seq, "the watch starts right after the load")
		require.Equal(t, chattyText, checkWatched(t, after, l.EventSeq))
		require.Equal(t, 1, kinds(after)[machine.EventResumed], "the watch starts after the suspension and finds its resume")

		// A store without an event log reports no position in one.
		core, err := newRunner(t, coreStore{s}, chattyModel(0)).LoadAt(ctx, "m1")
		require.NoError(t, err)
		require.Zero(t, core.EventSeq)
	})
}

// TestWatchAcrossDeleteAndRecreate: a watch open while its machine is
// deleted and created again under the same ID receives the new machine's
// events, every one once, in order. (A new machine's log that started
// again at 1 would hide from the watch as many events as the deleted one
// had logged.)
func TestWatchAcrossDeleteAndRecreate(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		suspended(t, newRunner(t, s, chattyModel(0)), "m1")
		logged, err := s.(store.EventLog).ReadEvents(ctx, "m1", 0, 0)
		require.NoError(t, err)
		last := logged[len(logged)-1].Seq

		r := newRunner(t, s, chattyModel(0))
		got := make(chan durable.Event)
		go func() {
			defer close(got)
			for e, err := range r.Watch(ctx, "m1", 0) {
				if err != nil {
					return
				}
				select {
				case got <- e:
				case <-ctx.Done():
					return
				}
			}
		}()
		// upTo receives the logged events up to the first that stop
		// accepts (or the watch's end).
		upTo := func(stop func(durable.Event) bool) []durable.Event {
			var out []durable.Event
			for e := range got {
				if e.Live {
					continue
				}
				out = append(out, e)
				if stop(e) {
					break
				}
			}
			return out
		}
		old := upTo(func(e durable.Event) bool { return e.Seq == last })
		require.Equal(t, last, int64(len(old)), "the watch reads the old log to its end")

		require.NoError(t, r.Delete(ctx, "m1"))
		suspended(t, r, "m1")
		relogged, err := s.(store.EventLog).ReadEvents(ctx, "m1", 0, 0)
		require.NoError(t, err)
		require.Len(t, relogged, len(logged), "the new machine logs what the old one did")
		again := upTo(func(e durable.Event) bool { return e.Seq == relogged[len(relogged)-1].Seq })
		require.Len(t, again, len(relogged), "the watch receives the new machine's events")
		require.Equal(t, last+1, relogged[0].Seq, "after the old log")
		checkWatched(t, again, last) // in order, without gaps or duplicates
	})
}

// TestWithSubscribed: a watch from the end of the log yields nothing
// until the run does; WithSubscribed tells when it is listening, so a run
// started then streams to it live from its first delta.
func TestWithSubscribed(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r := newRunner(t, s, chattyModel(2*time.Millisecond))
		id := suspended(t, r, "m1")
		loaded, err := r.LoadAt(ctx, "m1")
		require.NoError(t, err)
		ready := make(chan struct{})
		calls := 0
		wctx, cancel := context.WithCancel(durable.WithSubscribed(ctx, func() { calls++; close(ready) }))
		defer cancel()
		got := make(chan []durable.Event)
		go func() {
			var out []durable.Event
			for e, err := range r.Watch(wctx, "m1", loaded.EventSeq) {
				if err != nil {
					break
				}
				out = append(out, e)
				if e.Kind == machine.EventStep && e.Step.Done && e.Seq > 0 {
					break
				}
			}
			got <- out
		}()
		<-ready
		_, err = runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"}))
		require.NoError(t, err)
		events := <-got
		require.Equal(t, 1, calls)
		require.NotEmpty(t, events)
		require.True(t, events[0].Live, "the run's first event reached the watch live: %+v", events[0])
	})
}

// TestFinishedInTheFeed: the save that ends a run with the machine done
// adds one machine.finished change to the feed, with the last answer and
// the revision; the other saves of the run add none, and the next run
// that ends done adds another (WatchSuspensions leaves them out).
func TestFinishedInTheFeed(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r, _ := resumed(t, s, agentModel(0), "m1")
		finished := func() []store.MachineChange {
			changes, err := s.(store.EventLog).ReadSuspensionChanges(ctx, 0, 0)
			require.NoError(t, err)
			var out []store.MachineChange
			for _, c := range changes {
				if c.Machine != nil {
					require.Equal(t, "m1", c.Suspension.MachineID)
					out = append(out, *c.Machine)
				}
			}
			return out
		}
		st, err := r.Status(ctx, "m1")
		require.NoError(t, err)
		require.Equal(t, durable.StateDone, st.State)
		require.Equal(t, []store.MachineChange{{Event: store.MachineFinished, Revision: st.Revision, Answer: "all done"}}, finished())

		_, err = drain(r.Run(ctx, "m1", machine.UserText("again")))
		require.NoError(t, err)
		st2, err := r.Status(ctx, "m1")
		require.NoError(t, err)
		require.Greater(t, st2.Revision, st.Revision)
		require.Equal(t, []store.MachineChange{{Event: store.MachineFinished, Revision: st.Revision, Answer: "all done"},
			{Event: store.MachineFinished, Revision: st2.Revision, Answer: "all done"}}, finished())
	})
}
