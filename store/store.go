// Package store is the durable storage contract of markov: the small
// interfaces that persist machines between steps and processes, and the
// index of suspensions that resumes and timeout sweepers query.
//
// [Store] is the core a back end implements: [Snapshots] (Load, Save,
// Delete) and [Index] (FindSuspension, ListSuspensions). Anything more is
// an optional capability, discovered by type assertion the way
// http.Flusher is: [MachineLister], [ExpiryClaimer], [ReplayGuard],
// [TailLoader].
//
// A store keeps opaque bytes. The layer above (package durable) serializes a
// machine into two parts and this package never looks inside either:
//
//   - a tree snapshot: the instance tree and everything but the history,
//     small, rewritten on every step;
//   - an append-only history: one encoded message per entry. A save appends
//     only the entries that are new since the revision it was based on, so the
//     cost of a save does not grow with the length of the history.
//
// Every save is a compare-and-swap on the machine's revision: it names the
// revision it was based on (0 to create the machine) and fails with
// [ErrConflict], writing nothing, when the stored revision differs. Two
// processes resuming the same suspension therefore race to one winner.
//
// Each save also carries the machine's complete current list of suspensions,
// which atomically replaces the machine's previous entries in the suspension
// index. Every entry has one of four statuses ([Statuses]): pending,
// resolved, expired or cancelled. The index answers "which machine owns
// suspend ID X" ([Index.FindSuspension]), "what is pending (or expired, or
// cancelled), and which deadlines have passed" ([Index.ListSuspensions]),
// and, in stores that are an [ExpiryClaimer], hands expired pending
// suspensions to one sweeper at a time across processes.
//
// Implementations: store/memstore (in memory, for tests), store/sqlite (one
// file, pure Go) and store/postgres, each with every capability.
// store/storetest is the conformance suite, with checks per interface. This
// package imports only the standard library.
package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"
)

// Status is the lifecycle status of a suspension in the index: pending
// until a result, a deadline or a cancellation moves it to one of the
// three final statuses. A store keeps no other value.
type Status string

// The suspension statuses.
const (
	// StatusPending: waiting for a result. The only status
	// [ExpiryClaimer.ClaimExpired] considers.
	StatusPending Status = "pending"
	// StatusResolved: a result arrived (a resume, or a command's Resume).
	StatusResolved Status = "resolved"
	// StatusExpired: the deadline passed and the on-timeout action applied.
	StatusExpired Status = "expired"
	// StatusCancelled: the suspension was cancelled.
	StatusCancelled Status = "cancelled"
)

// Statuses returns every status, pending first.
func Statuses() []Status {
	return []Status{StatusPending, StatusResolved, StatusExpired, StatusCancelled}
}

// Valid reports whether s is one of [Statuses].
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusResolved, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// ParseStatus returns the status named s, or an error wrapping
// [ErrUnknownStatus] and [ErrInvalid] when s names none of [Statuses].
func ParseStatus(s string) (Status, error) {
	if st := Status(s); st.Valid() {
		return st, nil
	}
	return "", fmt.Errorf("%w %q (want pending, resolved, expired or cancelled): %w", ErrUnknownStatus, truncate(s, 64), ErrInvalid)
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// TimePrecision is the precision every store keeps times with. Times are
// truncated to it and returned in UTC, so a value read back compares equal
// (==, not only [time.Time.Equal]) to the value written after
// t.UTC().Truncate(TimePrecision).
const TimePrecision = time.Microsecond

// Snapshot is a persisted machine as [Snapshots.Load] returns it.
type Snapshot struct {
	// MachineID identifies the machine.
	MachineID string
	// Revision is the stored revision: 1 after the create, one more after
	// every save. Pass it as [Save.Revision] to save the next step.
	Revision int64
	// Tree is the tree snapshot of the last save.
	Tree []byte
	// History is every history entry appended so far, oldest first; from
	// [TailLoader.LoadTail], the entries from HistoryFrom on.
	History [][]byte
	// HistoryFrom is the position in the machine's history of History[0]:
	// 0 from Load. The machine's history holds HistoryFrom+len(History)
	// entries.
	HistoryFrom int
	// Incarnation identifies the creation of the machine: it stays the
	// same across every save of the machine and differs (but by a chance
	// of 2⁻⁶³) after the machine is deleted and created again under the
	// same ID. Stores that are a [TailLoader] set it, [NewIncarnation] at
	// the create; others leave it 0.
	Incarnation int64
	// UpdatedAt is when the last save was written (store clock, UTC).
	UpdatedAt time.Time
	// SuspendRequests reports that suspend requests were kept for the
	// machine when it was loaded. Only a [RequestReporter] sets it.
	SuspendRequests bool
	// EventSeq is the sequence number of the last entry of the machine's
	// event log when it was loaded, read in the same snapshot as the
	// tree: the entries up to it are those of the saves the snapshot
	// holds. A log without entries reports the machine ID's floor, the
	// last sequence number of the logs deleted with earlier machines of
	// the ID (0 if none, see [EventLog]): the machine's first event comes
	// after it. A watcher that starts from the load reads the log after
	// it only. Only a store that is an [EventLog] sets it; one that
	// leaves it 0 has such a watcher read the whole log.
	EventSeq int64
}

// NewIncarnation returns a random Snapshot.Incarnation, never 0, for a
// store to keep with a machine it creates.
func NewIncarnation() int64 {
	return rand.Int64N(math.MaxInt64) + 1
}

// TailLoader is the optional capability of a [Store] that loads a machine
// without the history its caller already has. Within one incarnation a
// machine's history only grows, so a caller that decoded its first n
// entries at some revision needs, at any later revision of the same
// incarnation, the entries from n on only: a load then costs the tree
// and the new entries, not the whole history.
type TailLoader interface {
	// LoadTail is Load with the history entries from position from on:
	// Snapshot.History holds them and HistoryFrom is from — or the
	// length of the stored history when that is shorter (History then
	// empty). The tree, revision, incarnation and entries are read in
	// one consistent snapshot. A negative from is ErrInvalid.
	LoadTail(ctx context.Context, machineID string, from int) (*Snapshot, error)
}

// Save is one write of a machine: a new tree snapshot, the history entries
// appended since Revision, and the complete current list of suspensions.
type Save struct {
	// MachineID identifies the machine. Required.
	MachineID string
	// Revision is the revision this save is based on: 0 creates the machine
	// (ErrConflict if it exists), otherwise it must equal the stored revision
	// (ErrConflict if not, or if the machine does not exist).
	Revision int64
	// Tree replaces the stored tree snapshot.
	Tree []byte
	// Append holds the history entries new since Revision, oldest first; they
	// are appended after the stored ones. Nil appends nothing.
	Append [][]byte
	// Suspensions is the machine's complete list of suspensions after this
	// save; it replaces the previous list in the index (nil clears it).
	// Suspend IDs must be non-empty, unique, and not owned by another
	// machine. MachineID and ClaimedUntil of each entry are ignored: the
	// store sets MachineID to Save.MachineID and keeps the claim lease of a
	// suspend ID that was already in the index, so a save does not release a
	// suspension a sweeper is working on.
	Suspensions []Suspension
	// Events are encoded events to append to the machine's event log, in
	// the save's transaction, oldest first (stores that are an
	// [EventLog]; others ignore them).
	Events [][]byte
	// Effects are outcomes of started effects (see [EffectJournal]) to
	// record in the save's transaction, by stores that are an
	// EffectJournal (others ignore them): an effect's done or failed
	// entry rides on the save that records its call's result and costs
	// no write of its own. An entry that is not started (none, or one
	// ended already) is left as it is, and the save goes on.
	Effects []EffectEnd
	// Audit are entries to append to the store's audit log in the save's
	// transaction, one statement each (stores that are an [AuditLog];
	// others ignore them).
	Audit []AuditAppend
	// Finish, when set, reports that this save finishes the machine: its
	// run ended with nothing pending and nothing left to do. Stores that
	// are an [EventLog] add a [MachineFinished] change to the suspension
	// feed in the save's transaction; others ignore it.
	Finish *Finish
}

// Validate reports a malformed save, wrapping [ErrInvalid]. Stores call it
// before writing anything.
func (s *Save) Validate() error {
	if p := idProblem(s.MachineID); p != "" {
		return fmt.Errorf("%w: machine ID %s", ErrInvalid, p)
	}
	if s.Revision < 0 {
		return fmt.Errorf("%w: machine %q: negative revision %d", ErrInvalid, s.MachineID, s.Revision)
	}
	seen := make(map[string]struct{}, len(s.Suspensions))
	for i, sp := range s.Suspensions {
		if p := idProblem(sp.ID); p != "" {
			return fmt.Errorf("%w: machine %q: the ID of suspension %d %s", ErrInvalid, s.MachineID, i, p)
		}
		if !sp.Status.Valid() {
			return fmt.Errorf("%w: machine %q: suspension %q has status %q: %w", ErrInvalid, s.MachineID, sp.ID, truncate(string(sp.Status), 64), ErrUnknownStatus)
		}
		if sp.Event != "" && !ValidID(sp.Event) {
			return fmt.Errorf("%w: machine %q: the event of suspension %q %s", ErrInvalid, s.MachineID, sp.ID, idProblem(sp.Event))
		}
		if _, dup := seen[sp.ID]; dup {
			return fmt.Errorf("%w: machine %q: duplicate suspend ID %q", ErrInvalid, s.MachineID, sp.ID)
		}
		seen[sp.ID] = struct{}{}
	}
	for _, e := range s.Effects {
		if err := CheckEffectEnd(e.Key, e.Status); err != nil {
			return fmt.Errorf("machine %q: %w", s.MachineID, err)
		}
	}
	return ValidateAudit(s.Audit)
}

// CheckRevision is the compare-and-swap of a save based on revision, for
// stores that read the stored revision first: stored is the machine's
// revision if exists. It returns nil when the save may proceed, and
// otherwise an error wrapping [ErrConflict] that says why.
func CheckRevision(revision, stored int64, exists bool) error {
	switch {
	case revision == 0 && exists:
		return fmt.Errorf("machine exists at revision %d: %w", stored, ErrConflict)
	case revision != 0 && !exists:
		return fmt.Errorf("based on revision %d, but the machine does not exist: %w", revision, ErrConflict)
	case exists && stored != revision:
		return fmt.Errorf("based on revision %d, stored revision is %d: %w", revision, stored, ErrConflict)
	}
	return nil
}

// MaxIDLen is the length, in bytes, of the longest machine or suspend ID
// a store keeps.
const MaxIDLen = 256

// ValidID reports whether id can name a machine or a suspension in every
// store: not empty, at most [MaxIDLen] bytes, valid UTF-8 and without NUL
// bytes (which PostgreSQL's text type refuses). A save naming another ID
// fails with [ErrInvalid]; a lookup of one finds nothing ([CheckID]).
func ValidID(id string) bool { return idProblem(id) == "" }

// CheckID returns nil for a [ValidID], and otherwise an error wrapping
// [ErrNotFound]: no machine or suspension can have that ID. Stores call it
// before looking an ID up, so that every store answers a malformed ID
// alike, without a query.
func CheckID(id string) error {
	if p := idProblem(id); p != "" {
		return fmt.Errorf("%w: the ID %s", ErrNotFound, p)
	}
	return nil
}

// idProblem says what makes id invalid ("is empty", ...), or "".
func idProblem(id string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > MaxIDLen:
		return fmt.Sprintf("is longer than %d bytes", MaxIDLen)
	case !utf8.ValidString(id):
		return "is not valid UTF-8"
	case strings.IndexByte(id, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// Suspension is one entry of the suspension index.
type Suspension struct {
	// ID is the suspend ID, unique across all machines of a store.
	ID string
	// MachineID is the machine that owns the suspension (set by the store).
	MachineID string
	// Status is the lifecycle status, one of [Statuses]. Required.
	Status Status
	// Kind, Name and Reason are small descriptive metadata (for example
	// "tool", the tool's name, and the reason given to Suspend).
	Kind, Name, Reason string
	// Deadline is when the suspension times out; zero means never.
	Deadline time.Time
	// RemindAt is when the suspension's next reminder is due (a governed
	// call's instance.Policy.Remind); zero means none. A reminder leaves
	// the suspension pending and its Deadline unchanged.
	RemindAt time.Time
	// Event is the named event the suspension waits for besides a resume
	// (empty: none); Filter.Event finds the suspensions a signal wakes. It
	// must be empty or a [ValidID].
	Event string
	// CreatedAt is when the suspension was made.
	CreatedAt time.Time
	// ClaimedUntil is the end of the lease of the last [ExpiryClaimer.ClaimExpired]
	// that handed out this suspension, zero if it was never claimed. It is
	// maintained by the store and ignored in a [Save].
	ClaimedUntil time.Time
}

// Due is when s next needs its machine run without an input: the
// earlier of its Deadline and its RemindAt, zero when it has neither.
func (s Suspension) Due() time.Time {
	if s.RemindAt.IsZero() || !s.Deadline.IsZero() && s.Deadline.Before(s.RemindAt) {
		return s.Deadline
	}
	return s.RemindAt
}

// CompareSuspensions is the order every listing uses: by deadline, earliest
// first, suspensions without a deadline last; then by CreatedAt; then by ID.
// It returns -1, 0 or +1, for [slices.SortFunc].
func CompareSuspensions(a, b Suspension) int {
	switch az, bz := a.Deadline.IsZero(), b.Deadline.IsZero(); {
	case az && !bz:
		return 1
	case !az && bz:
		return -1
	}
	if c := a.Deadline.Compare(b.Deadline); c != 0 {
		return c
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Filter selects suspensions for [Index.ListSuspensions]. The zero Filter
// selects every suspension.
type Filter struct {
	// MachineID, if set, selects the suspensions of one machine.
	MachineID string
	// Status, if set, selects suspensions with exactly this status; it must
	// be one of [Statuses] ([Filter.Validate]).
	Status Status
	// DeadlineBefore, if non-zero, selects suspensions that have a deadline
	// strictly before it (after truncation to TimePrecision).
	DeadlineBefore time.Time
	// Event, if set, selects the suspensions waiting for exactly this
	// event (Suspension.Event).
	Event string
	// Limit, if positive, caps the number of suspensions returned.
	Limit int
}

// Validate reports a malformed filter: a Status that is not one of
// [Statuses] (an error wrapping [ErrUnknownStatus] and [ErrInvalid]).
// Stores call it before querying and return its error.
func (f Filter) Validate() error {
	if f.Status != "" && !f.Status.Valid() {
		_, err := ParseStatus(string(f.Status))
		return err
	}
	return nil
}

// Selective reports whether a valid filter can select anything: its
// MachineID, when set, is a [ValidID]. Stores answer an empty list to a
// filter that is not, without a query.
func (f Filter) Selective() bool {
	return (f.MachineID == "" || ValidID(f.MachineID)) && (f.Event == "" || ValidID(f.Event))
}

// Match reports whether s passes the filter, ignoring Limit. Stores that
// filter in Go use it; it is the reference semantics for the others.
func (f Filter) Match(s Suspension) bool {
	if f.MachineID != "" && s.MachineID != f.MachineID {
		return false
	}
	if f.Status != "" && s.Status != f.Status {
		return false
	}
	if f.Event != "" && s.Event != f.Event {
		return false
	}
	if !f.DeadlineBefore.IsZero() && (s.Deadline.IsZero() || !s.Deadline.Before(f.DeadlineBefore)) {
		return false
	}
	return true
}

// Claimable reports whether [ExpiryClaimer.ClaimExpired] at now may hand out s: it is
// pending, has a deadline or a reminder not after now, and is not under a
// lease that ends after now. It is the reference semantics for every
// store.
func Claimable(s Suspension, now time.Time) bool {
	return s.Status == StatusPending &&
		!s.Due().IsZero() && !s.Due().After(now) &&
		!s.ClaimedUntil.After(now)
}

// Snapshots persists machines: a tree snapshot and an append-only
// history per machine, written with compare-and-swap revisions. Every
// method that fails writes nothing.
//
// Byte slices passed in may be reused by the caller once a method returns,
// and slices returned belong to the caller.
type Snapshots interface {
	// Load returns the stored machine with its whole history, or an error
	// wrapping ErrNotFound.
	Load(ctx context.Context, machineID string) (*Snapshot, error)

	// Save writes the tree, appends s.Append to the history and replaces the
	// machine's suspensions, all or nothing, if the stored revision equals
	// s.Revision (0: the machine must not exist). It returns the new
	// revision. A mismatch returns an error wrapping ErrConflict; a malformed
	// save or a suspend ID owned by another machine, ErrInvalid.
	Save(ctx context.Context, s Save) (revision int64, err error)

	// Delete removes the machine, its history and its suspensions, or
	// returns an error wrapping ErrNotFound. A store that is an
	// [EventLog] removes the machine's event log too, but keeps its last
	// sequence number: a machine created again under the ID logs after
	// it, so that no sequence number of the ID repeats.
	Delete(ctx context.Context, machineID string) error
}

// Index answers questions about the suspension index that [Snapshots.Save]
// maintains.
type Index interface {
	// FindSuspension returns the index entry for a suspend ID, whatever its
	// status, or an error wrapping ErrNotFound.
	FindSuspension(ctx context.Context, suspendID string) (Suspension, error)

	// ListSuspensions returns the suspensions the filter selects, in
	// CompareSuspensions order. A filter that fails [Filter.Validate]
	// returns its error and queries nothing.
	ListSuspensions(ctx context.Context, f Filter) ([]Suspension, error)
}

// Store is what package durable needs of a back end: machine snapshots and
// the suspension index their saves maintain. Implementations are safe for
// concurrent use; the SQL ones are also safe for several processes sharing
// one database.
//
// A store may offer more through optional interfaces, discovered by type
// assertion the way http.Flusher is on an http.ResponseWriter:
// [MachineLister] (listing machines), [ExpiryClaimer] (leases on expired
// suspensions for timeout sweepers), [ReplayGuard] (replay protection
// for signed requests, shared by every process of the store) and
// [TailLoader] (loads that skip the history a caller has). Every store
// of this module implements all four, and a Close method; the SQLite and
// PostgreSQL stores also implement [Pinger] (a readiness check).
type Store interface {
	Snapshots
	Index
}

// Pinger is the optional capability of a [Store] that checks it can serve:
// its database answers a cheap query and its schema is the version this
// package writes. Readiness probes (markov serve's GET /readyz) call it.
type Pinger interface {
	// Ping returns nil when the store can serve, or an error saying why not
	// (a closed store, an unreachable database, a schema at another version:
	// [ErrSchemaVersion]).
	Ping(ctx context.Context) error
}

// MachineLister is the optional capability of a [Store] that lists the
// machines it keeps.
type MachineLister interface {
	// ListMachines returns the IDs of every stored machine in ascending
	// (bytewise) order.
	ListMachines(ctx context.Context) ([]string, error)
}

// ReplayGuard is the optional capability of a [Store] that remembers keys
// for a while, for every process that shares the store: resumehttp keeps
// the signatures of the requests it served in it, so that a signed
// request is accepted once fleet-wide within its window.
type ReplayGuard interface {
	// Remember records key until expiresAt and reports whether it is
	// fresh: false when a record of key that has not expired exists (then
	// it is left as it is). Of concurrent calls with one key, in any
	// process, at most one is fresh. A record has expired once the store's
	// clock reaches its expiresAt (PostgreSQL's now(), the process clock in
	// the others); expired records count for nothing and are deleted by
	// later calls. A key that is not a [ValidID] is ErrInvalid.
	Remember(ctx context.Context, key string, expiresAt time.Time) (fresh bool, err error)

	// Forget deletes the record of key, if there is one, so that the next
	// Remember of it is fresh: resumehttp gives a command's
	// Idempotency-Key back when the command was refused and changed
	// nothing. A key that is not a [ValidID] is ErrInvalid.
	Forget(ctx context.Context, key string) error
}

// OutcomeKeeper is the optional capability of a [ReplayGuard] that keeps,
// with a live record of a key, the outcome of the request the key stands
// for, so that a second delivery of the request is answered with the
// first one's outcome (resumehttp). The outcome goes with the record:
// when it expires, or is forgotten.
type OutcomeKeeper interface {
	// KeepOutcome stores outcome with the live record of key; with none
	// (expired, forgotten) it does nothing. A key that is not a
	// [ValidID] is ErrInvalid.
	KeepOutcome(ctx context.Context, key string, outcome []byte) error
	// Outcome returns the outcome kept with the live record of key: nil
	// while it has none; ErrNotFound without a live record.
	Outcome(ctx context.Context, key string) ([]byte, error)
}

// ParkedMachine is a machine a sweeper could not run, as a [Parker]
// keeps it.
type ParkedMachine struct {
	MachineID string
	// Errors are the errors of the sweeps that failed on it since its
	// last save, oldest first (at most MaxParkedErrors).
	Errors []string
	// At is when it was last parked.
	At time.Time
}

// MaxParkedErrors is how many errors a [Parker] keeps per machine: the
// latest.
const MaxParkedErrors = 10

// Parker is the optional capability of a [Store] that keeps the machines
// a timeout sweeper could not run (durable.Runner.Sweep: a machine that
// does not load), so that an operator sees them from any process. A
// machine stays parked until it is saved again (a parked entry records
// the revision it failed at) or deleted.
type Parker interface {
	// Park records that machineID, at its current revision, failed with
	// reason at at; parking it again at the same revision adds the
	// reason to its errors. A store that is an [EventLog] adds a
	// [MachineParked] change, with the errors, to its suspension feed in
	// the same transaction. An unknown machine is ErrNotFound.
	Park(ctx context.Context, machineID, reason string, at time.Time) error
	// ListParked lists the parked machines not saved since, most recently
	// parked first, at most limit (no cap if limit <= 0).
	ListParked(ctx context.Context, limit int) ([]ParkedMachine, error)
}

// ExpiryClaimer is the optional capability of a [Store] that hands expired
// pending suspensions to one timeout sweeper at a time, across processes.
type ExpiryClaimer interface {
	// ClaimExpired hands out up to limit (no cap if limit <= 0) suspensions
	// that are Claimable at now — past their deadline, or with a reminder
	// due (Suspension.RemindAt) — in the order of CompareSuspensions, and leases them
	// until now+lease: until then no other call, in any process, receives
	// them again. The returned entries carry the new ClaimedUntil. A
	// sweeper that handled a suspension saves its machine with the
	// suspension removed or no longer pending; one that crashed lets the
	// lease run out, and the suspension is handed out again. A lease <= 0 is
	// ErrInvalid.
	ClaimExpired(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]Suspension, error)
}
