package store

import (
	"bytes"
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// LogEvent is one entry of a machine's event log ([EventLog]).
type LogEvent struct {
	// Seq is the entry's sequence number: one more than the entry
	// before it; 1 for the first event of a machine ID, and never reused
	// for that ID, even after [Snapshots.Delete] and a new machine
	// created under it (see [EventLog]).
	Seq int64
	// Data is the encoded event, as [Save.Events] carried it.
	Data []byte
	// At is when the save that appended it was written (store clock, UTC).
	At time.Time
}

// SuspensionChange is one entry of the suspension feed ([EventLog]): a
// suspension that entered the index, or whose status changed, in a save;
// or, when Machine is set, a change of a whole machine (it finished, or
// it was parked).
type SuspensionChange struct {
	// Cursor orders the feed across all machines of the store: every change
	// has a larger cursor than every change committed before it.
	Cursor int64
	// Suspension is the index entry after the change (ClaimedUntil is
	// zero). For a machine change it holds only the MachineID.
	Suspension Suspension
	// Machine is the machine change this entry is, nil for a suspension
	// change.
	Machine *MachineChange
	// At is when the save (or the park) was written (store clock, UTC).
	At time.Time
}

// MachineEvent is what happened to a machine in a [MachineChange].
type MachineEvent string

// The machine events of the suspension feed.
const (
	// MachineFinished: a save with [Save.Finish] set — its run ended
	// with the machine done, nothing pending and nothing left to do.
	MachineFinished MachineEvent = "finished"
	// MachineParked: a [Parker] parked it.
	MachineParked MachineEvent = "parked"
)

// MachineChange is a machine-level entry of the suspension feed.
type MachineChange struct {
	Event MachineEvent
	// Revision is the machine's revision: the one the finishing save
	// wrote, or the one it was parked at.
	Revision int64
	// Answer is the finished machine's last answer (MachineFinished).
	Answer string
	// Errors are the parked machine's errors, oldest first, the latest
	// last (MachineParked).
	Errors []string
}

// Finish marks a save that finishes its machine ([Save.Finish]).
type Finish struct {
	// Answer is the text of the machine's last answer ("" if none).
	Answer string
}

// Notice is what a [Subscription] wakes its holder with.
type Notice struct {
	// Live holds the payloads [EventLog.Publish] sent since the last
	// notice, oldest first. A subscriber that falls far behind may miss
	// some: live payloads are best effort; the log is the record.
	Live [][]byte
	// Appended reports that the log (or the feed) may have grown: false
	// only when the store knows the notice carries nothing but Live.
	Appended bool
}

// Subscription wakes its holder when the event log (or the suspension
// feed) it watches may have grown, and hands over live payloads. It is
// used by one goroutine at a time.
type Subscription interface {
	// Next waits until something may have happened since the previous
	// call (or since Subscribe): an event appended, a change in the feed,
	// a live payload. The holder then reads the log after its cursor. A
	// notice may come with nothing new to read. ctx ends the wait with
	// ctx.Err().
	Next(ctx context.Context) (Notice, error)
	// Close releases the subscription. Calling it again does nothing.
	Close() error
}

// MaxLivePayload is the largest payload, in bytes, that
// [EventLog.Publish] accepts (PostgreSQL's NOTIFY takes under 8000).
const MaxLivePayload = 7000

// EventLog is the optional capability of a [Store] that keeps an event
// log per machine, a suspension feed across machines, and hands both to
// watchers in any process that shares the store.
//
// The log is written by [Snapshots.Save]: the entries of [Save.Events] are
// appended in the save's transaction, so a save and its events commit
// together or not at all. The feed is written by saves too: each
// suspension of [Save.Suspensions] that is new to the index, or whose
// status differs from the stored one, adds one change, and a save with
// [Save.Finish] adds a [MachineFinished] change after them; a [Parker]'s
// Park adds a [MachineParked] change in its own transaction. [Snapshots.Delete]
// deletes the machine's log and its changes from the feed.
//
// Sequence numbers never repeat for a machine ID. Delete keeps the last
// sequence number of the log it deletes (the ID's floor, a number per
// machine ID ever deleted), and a machine created again under the ID
// logs its events from the floor on: floor+1, floor+2, … A position in
// the log (an afterSeq, a Last-Event-ID) therefore stays valid across a
// delete and a re-creation: a watcher at N reads the new machine's
// events, none of which has a sequence number of N or less, instead of
// skipping its first N. A load of the new machine before it logs
// anything reports the floor as [Snapshot.EventSeq].
//
// Live payloads ([EventLog.Publish]) are not stored in the log: they reach
// the subscriptions open at the time, in this process and in others —
// through NOTIFY in PostgreSQL, a short-lived table polled in SQLite — and
// a watcher that misses them finds the record of what they said in the
// log.
type EventLog interface {
	// ReadEvents returns up to limit (no cap if limit <= 0) entries of
	// machineID's log with Seq > afterSeq, oldest first. A machine
	// without entries, or that does not exist, gives an empty list. The
	// log of a machine created again after a delete holds only the new
	// machine's entries, all above the deleted log's.
	ReadEvents(ctx context.Context, machineID string, afterSeq int64, limit int) ([]LogEvent, error)

	// ReadSuspensionChanges returns up to limit (no cap if limit <= 0)
	// changes of the suspension feed with Cursor > afterCursor, oldest
	// first.
	ReadSuspensionChanges(ctx context.Context, afterCursor int64, limit int) ([]SuspensionChange, error)

	// Publish hands payloads to the subscriptions of machineID open now,
	// in every process, in order; nothing is stored. A payload longer
	// than MaxLivePayload, or that is not valid UTF-8, is ErrInvalid and
	// nothing is published.
	Publish(ctx context.Context, machineID string, payloads [][]byte) error

	// Subscribe opens a subscription to machineID's log and live
	// payloads, or to the suspension feed when machineID is empty.
	// Subscribe before the first read, so that nothing committed between
	// the read and the wait goes unnoticed.
	Subscribe(ctx context.Context, machineID string) (Subscription, error)
}

// CheckLive returns an error wrapping [ErrInvalid] if payloads cannot be
// published for machineID ([EventLog.Publish]): a malformed machine ID
// ([CheckID]) or a payload too long or not text.
func CheckLive(machineID string, payloads [][]byte) error {
	if err := CheckID(machineID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for i, p := range payloads {
		if len(p) > MaxLivePayload {
			return fmt.Errorf("%w: live payload %d is %d bytes, over %d", ErrInvalid, i, len(p), MaxLivePayload)
		}
		if !validText(p) {
			return fmt.Errorf("%w: live payload %d is not valid UTF-8 text without NUL bytes", ErrInvalid, i)
		}
	}
	return nil
}

// validText reports whether p is valid UTF-8 without NUL bytes.
func validText(p []byte) bool { return utf8.Valid(p) && bytes.IndexByte(p, 0) < 0 }
