package durable

import (
	"context"
	"fmt"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
)

// State is what a machine is doing, as [Runner.Status] reports it.
type State string

// The states of a machine.
const (
	// StateRunning: a run holds the machine now (in this process, or —
	// on a store that is a [LockProber] — in any process).
	StateRunning State = "running"
	// StateAwaitingResume: no run holds it, and it has pending
	// suspensions.
	StateAwaitingResume State = "awaiting_resume"
	// StateIdle: no run holds it, nothing is pending, and no run has
	// ended: a machine that has not run yet, or whose run was cut short
	// (its process died, its context ended) after an input was saved —
	// its next run, with any input or none, continues it.
	StateIdle State = "idle"
	// StateDone: no run holds it, nothing is pending, and its last run
	// ended (every leaf ended its turn): it waits for new input.
	StateDone State = "done"
	// StateParked: a fleet gave its job up after its last attempt
	// (package fleet); Status.Errors says why.
	StateParked State = "parked"
)

// Status is a machine's state at one moment.
type Status struct {
	MachineID string
	State     State
	// Revision is the stored revision; UpdatedAt when it was saved.
	Revision  int64
	UpdatedAt time.Time
	// Pending are the machine's pending suspensions.
	Pending []store.Suspension
	// Messages is the length of the history; LastText the text of its
	// last assistant message with text ("" if none): what the last run
	// said.
	Messages int
	LastText string
	// Queued counts the inputs accepted and not applied yet (a fleet's
	// inbox); always 0 in process, where an input is applied when it is
	// accepted.
	Queued int
	// Errors are the errors of a parked machine's attempts, oldest first.
	Errors []string
	// EventSeq is the sequence number of the last entry of the machine's
	// event log when it was loaded for this status (Loaded.EventSeq):
	// [Runner.Watch] from it yields what happened since.
	EventSeq int64
}

// Parked is a machine whose job a fleet gave up after its last attempt
// (package fleet), or that a sweep could not run ([Runner.Parked]): its
// inputs or deadline wait until the machine is fixed and sent a new
// input.
type Parked struct {
	MachineID string
	// Job is the River job ID (0 for a sweep); Kind its kind
	// (markov_run, markov_expire, or KindSweep).
	Job  int64
	Kind string
	// Errors are the errors of the attempts, oldest first.
	Errors []string
	// At is when it was parked.
	At time.Time
}

// LockProber is an optional capability of a [Locker] store: it tells
// whether a machine's lock is held, by any process. store/postgres
// implements it by looking the advisory lock up in pg_locks.
type LockProber interface {
	// MachineLocked reports whether machineID's lock is held now.
	MachineLocked(ctx context.Context, machineID string) (bool, error)
}

// Status returns what machine id is doing: running, awaiting a resume,
// idle or done (see [State]), with its revision, pending suspensions and
// the last thing it said. An unknown machine fails with an error wrapping
// store.ErrNotFound. The answer is a moment's: a run may start or end
// right after.
func (r *Runner) Status(ctx context.Context, id string) (Status, error) {
	if err := store.CheckID(id); err != nil {
		return Status{}, fmt.Errorf("status of machine: %w: %w", store.ErrNotFound, err)
	}
	held, err := r.held(ctx, id)
	if err != nil {
		return Status{}, err
	}
	s, err := r.loadStatus(ctx, id)
	if err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	st := s.status(held)
	st.UpdatedAt, st.EventSeq = s.updatedAt, s.eventSeq
	return st, nil
}

// statusTail is how many history entries a status reads first when it
// reads the end of a history (loadStatus): the last assistant text is
// seldom further back.
const statusTail = 32

// loadStatus loads machine id for a status: as load does when the
// history cache holds its whole history, or the store is no
// store.TailLoader; otherwise with the end of the history only
// (loadEnd), read again longer while it holds no assistant text. A status
// of a long machine then reads what its last reply needs, not every
// message.
func (r *Runner) loadStatus(ctx context.Context, id string) (*session, error) {
	tl, tails := r.store.(store.TailLoader)
	if !tails || r.histories.whole(id) {
		return r.load(ctx, id, false)
	}
	snap, m, err := r.loadEnd(ctx, tl, id, statusTail, func(m *machine.Machine) (said bool) {
		access.MachineView(m, func(_ *instance.Instance, h message.History) { said = lastText(h.Messages()) != "" })
		return said
	})
	if err != nil {
		return nil, fmt.Errorf("load machine %s: %w", id, err)
	}
	return r.assemble(ctx, id, snap, cachedHistory{}, m)
}

// lastText is the text of the last assistant message of history with
// text, "" if none.
func lastText(history []message.Message) string {
	for i := len(history) - 1; i >= 0; i-- {
		if t := history[i].Text(); history[i].Role == message.Assistant && t != "" {
			return t
		}
	}
	return ""
}

// status is the status of the session's machine, held or not.
func (s *session) status(held bool) Status {
	st := Status{MachineID: s.id, Revision: s.rev, Pending: []store.Suspension{}}
	for _, e := range s.indexed {
		if e.Status == store.StatusPending {
			st.Pending = append(st.Pending, e)
		}
	}
	active := false
	access.MachineView(s.m, func(root *instance.Instance, h message.History) {
		st.Messages, st.LastText = s.from+h.Len(), lastText(h.Messages())
		active = hasWork(root)
	})
	switch {
	case held:
		st.State = StateRunning
	case len(st.Pending) > 0:
		st.State = StateAwaitingResume
	case active || st.Messages == 0:
		st.State = StateIdle
	default:
		st.State = StateDone
	}
	return st
}

// hasWork reports whether a leaf of root has work left: it is neither
// idle (its turn ended) nor suspended.
func hasWork(root *instance.Instance) bool {
	for l := range root.Leaves() {
		if !l.Idle && !l.Suspended() {
			return true
		}
	}
	return false
}

// held reports whether a run holds machine id: in this process, or in
// any when the store is a LockProber.
func (r *Runner) held(ctx context.Context, id string) (bool, error) {
	if r.local.held(id) {
		return true, nil
	}
	p, ok := r.store.(LockProber)
	if !ok {
		return false, nil
	}
	held, err := p.MachineLocked(ctx, id)
	if err != nil {
		return false, fmt.Errorf("status of machine %s: %w", id, err)
	}
	return held, nil
}

// held reports whether machine id's lock is taken in this process.
func (l *localLocks) held(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.slots[id]
	return s != nil && len(s.ch) > 0
}
