package durable

import (
	"context"
	"fmt"
	"iter"

	"github.com/markov-agents/markov/store"
)

// readBatch is how many log entries (or feed changes) one read fetches.
const readBatch = 256

// Watch yields the events of machine id from any process: first those of
// its event log with a sequence number above afterSeq (0: from the
// start), oldest first, then the live ones as they happen, until ctx is
// done or the caller stops. It never polls in a loop where the store can
// notify: store/postgres wakes it through LISTEN/NOTIFY; store/sqlite by
// polling with backoff across processes, and at once within the process;
// store/memstore at once.
//
// Every event of a durable run — what machine.Machine.Events yields for
// the same inputs, which RunEvents yields too (docs/events.md) — is logged
// in the transaction of the save it belongs to, with its sequence number
// (Event.Seq), except that text
// and thinking deltas are logged coalesced, one per content block; those
// deltas and tool starts also reach watchers live (Event.Live, Seq 0)
// before the save. To resume after a disconnection without a gap or a
// duplicate, pass the Seq of the last logged event received as afterSeq.
// A watcher that received part of a block's text live receives only the
// rest from the log (an event received whole is yielded with Echo set),
// so that concatenating the deltas gives each block's text once; live
// events that a save has overtaken are dropped.
//
// An error is yielded once as (Event{}, err) and the sequence ends: the
// ctx's error when it is done, ErrUnsupported when the store is not a
// store.EventLog, an error wrapping store.ErrNotFound when id is not a
// valid machine ID. A machine that does not exist (yet) is watched all the
// same: its events come once it runs.
//
// Sequence numbers never repeat for a machine ID (store.EventLog): a
// machine deleted and created again under the same ID logs after the
// deleted one's last event. A watch open across the delete, or one
// resumed with the Seq of an event of the deleted machine, therefore
// yields every event of the new machine, none of which it has seen.
func (r *Runner) Watch(ctx context.Context, machineID string, afterSeq int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		l, ok := r.store.(store.EventLog)
		if !ok {
			yield(Event{}, fmt.Errorf("watch: %w", ErrUnsupported))
			return
		}
		if err := store.CheckID(machineID); err != nil {
			yield(Event{}, fmt.Errorf("watch machine: %w", err))
			return
		}
		sub, err := l.Subscribe(ctx, machineID)
		if err != nil {
			yield(Event{}, fmt.Errorf("watch machine %s: %w", machineID, err))
			return
		}
		defer sub.Close()
		if f, ok := ctx.Value(subscribedKey{}).(func()); ok {
			f()
		}
		w := &watcher{log: l, id: machineID, seq: max(afterSeq, 0), yield: yield}
		if !w.readLog(ctx) {
			return
		}
		for {
			n, err := sub.Next(ctx)
			if err != nil {
				w.fail(fmt.Errorf("watch machine %s: %w", machineID, err))
				return
			}
			// Live events first: what the log then has of them is
			// trimmed, and those it had overtaken are dropped.
			if !w.live(n.Live) || n.Appended && !w.readLog(ctx) {
				return
			}
		}
	}
}

// subscribedKey is the context key of WithSubscribed's function.
type subscribedKey struct{}

// WithSubscribed returns a copy of ctx with which Watch calls f once it
// has subscribed to the machine's live events, before it reads the log:
// a caller that starts a run only after f is called receives every live
// event of that run (a Watch only subscribes once it is ranged over).
func WithSubscribed(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, subscribedKey{}, f)
}

// watcher is the state of one Watch.
type watcher struct {
	log   store.EventLog
	id    string
	yield func(Event, error) bool
	// seq and rev are the sequence number and revision of the last logged
	// event yielded.
	seq, rev int64
	// streamed is the bytes of each block's text yielded live, and seen
	// the liveKey of the other events yielded live; both for revision
	// liveRev only.
	streamed map[blockKey]int
	seen     map[string]bool
	liveRev  int64
	stopped  bool
}

func (w *watcher) fail(err error) {
	if !w.stopped {
		w.yield(Event{}, err)
		w.stopped = true
	}
}

// readLog yields the log after the cursor; false when the watch ends.
func (w *watcher) readLog(ctx context.Context) bool {
	for {
		entries, err := w.log.ReadEvents(ctx, w.id, w.seq, readBatch)
		if err != nil {
			w.fail(fmt.Errorf("watch machine %s: %w", w.id, err))
			return false
		}
		for _, le := range entries {
			rc, err := decodeEvent(le.Data)
			if err != nil {
				w.fail(fmt.Errorf("watch machine %s: event %d: %w", w.id, le.Seq, err))
				return false
			}
			w.seq, w.rev = le.Seq, rc.Rev
			e := Event{Event: rc.Event, Seq: le.Seq, Revision: rc.Rev, At: le.At}
			w.dedup(&e)
			if !w.yield(e, nil) {
				w.stopped = true
				return false
			}
		}
		if len(entries) < readBatch {
			return true
		}
	}
}

// dedup trims from logged event e what this watcher received live.
func (w *watcher) dedup(e *Event) {
	if e.Revision-1 != w.liveRev {
		return
	}
	switch {
	case isDelta(e.Kind):
		n := w.streamed[keyOf(e.Event, w.liveRev)]
		if n > 0 && n <= len(e.Text) {
			e.Text = e.Text[n:]
			e.Echo = e.Text == ""
		}
	case liveKey(e.Event) != "":
		e.Echo = w.seen[liveKey(e.Event)]
	}
}

// live yields the live payloads a save has not overtaken; false when the
// watch ends.
func (w *watcher) live(payloads [][]byte) bool {
	for _, p := range payloads {
		rc, err := decodeEvent(p)
		if err != nil || rc.Rev < w.rev {
			continue // a save has recorded it, or it is not ours to read
		}
		if rc.Rev != w.liveRev || w.streamed == nil {
			w.liveRev, w.streamed, w.seen = rc.Rev, map[blockKey]int{}, map[string]bool{}
		}
		if isDelta(rc.Kind) {
			k := keyOf(rc.Event, rc.Rev)
			if w.streamed[k] != rc.Offset {
				continue // joined mid-block, or missed a part: the log has it all
			}
			w.streamed[k] += len(rc.Text)
		} else if k := liveKey(rc.Event); k != "" {
			w.seen[k] = true
		}
		if !w.yield(Event{Event: rc.Event, Revision: rc.Rev, At: rc.At, Live: true}, nil) {
			w.stopped = true
			return false
		}
	}
	return true
}

// WatchSuspensions yields the suspension feed of the store: every
// suspension that is created, resolved, expired or cancelled, on any
// machine, in any process — first the changes with a cursor above
// afterCursor (0: from the start), then the new ones as they commit. An
// approvals inbox subscribes to it; to resume after a disconnection, pass
// the Cursor of the last change received. The feed's machine changes
// (store.MachineChange) are left out. Errors are as for Watch.
func (r *Runner) WatchSuspensions(ctx context.Context, afterCursor int64) iter.Seq2[store.SuspensionChange, error] {
	return func(yield func(store.SuspensionChange, error) bool) {
		l, ok := r.store.(store.EventLog)
		if !ok {
			yield(store.SuspensionChange{}, fmt.Errorf("watch suspensions: %w", ErrUnsupported))
			return
		}
		sub, err := l.Subscribe(ctx, "")
		if err != nil {
			yield(store.SuspensionChange{}, fmt.Errorf("watch suspensions: %w", err))
			return
		}
		defer sub.Close()
		cursor := max(afterCursor, 0)
		for {
			for {
				changes, err := l.ReadSuspensionChanges(ctx, cursor, readBatch)
				if err != nil {
					yield(store.SuspensionChange{}, fmt.Errorf("watch suspensions: %w", err))
					return
				}
				for _, c := range changes {
					cursor = c.Cursor
					if c.Machine != nil {
						continue
					}
					if !yield(c, nil) {
						return
					}
				}
				if len(changes) < readBatch {
					break
				}
			}
			if _, err := sub.Next(ctx); err != nil {
				yield(store.SuspensionChange{}, fmt.Errorf("watch suspensions: %w", err))
				return
			}
		}
	}
}

// CanWatch reports whether the runner's store keeps an event log, so that
// Watch and WatchSuspensions work (resumehttp answers 501 otherwise).
func (r *Runner) CanWatch() bool {
	_, ok := r.store.(store.EventLog)
	return ok
}
