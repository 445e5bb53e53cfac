package store

import (
	"context"
	"fmt"
	"time"
)

// EffectJournal is the optional capability of a Store that journals the
// external effects of tools and commands (node.Effect): before an effect
// runs its entry is recorded as started, after it returns as done (with
// its result) or failed. A call that runs again — after a crash, a
// rescued job, a retried resume — finds the entry: a done effect is not
// run again, and one started but never finished is in doubt, for its
// reconcile hook or a person to settle.
type EffectJournal interface {
	// BeginEffect records e as started (its Status, Result and times are
	// set by the store) unless an entry of e.Key exists, and returns the
	// entry as stored and whether this call created it. Of concurrent
	// calls with one key, in any process, at most one creates it. A key
	// or machine ID that is not a [ValidID] is ErrInvalid.
	BeginEffect(ctx context.Context, e Effect) (stored Effect, created bool, err error)

	// EndEffect records the outcome of the started effect key: status
	// EffectDone with its result, or EffectFailed with the error's text.
	// An entry that is not started (none, or one already ended) is
	// ErrConflict and is left as it is.
	EndEffect(ctx context.Context, key string, status EffectStatus, result []byte) error

	// ForgetEffect deletes the entry of key, if there is one: a person
	// decided that an effect in doubt did not happen, and the next
	// BeginEffect of it creates it again.
	ForgetEffect(ctx context.Context, key string) error
}

// EffectEnd is the outcome of a started effect, as a [Save] records it
// (Save.Effects): what EndEffect records, in the save's transaction.
type EffectEnd struct {
	// Key is the effect's key; Status EffectDone or EffectFailed.
	Key    string
	Status EffectStatus
	// Result is the done effect's result (JSON), or the failed effect's
	// error text.
	Result []byte
}

// EffectStatus is the state of a journaled effect.
type EffectStatus string

// The states of a journaled effect: started → done | failed.
const (
	EffectStarted EffectStatus = "started"
	EffectDone    EffectStatus = "done"
	EffectFailed  EffectStatus = "failed"
)

// Effect is one entry of an effect journal.
type Effect struct {
	// Key identifies the effect: the call's idempotency key and the
	// effect's name. Unique across the store.
	Key string
	// MachineID is the machine whose call ran it; the machine's deletion
	// deletes its entries.
	MachineID string
	// Name is the effect's name, Digest the digest of its input.
	Name, Digest string
	Status       EffectStatus
	// Result is the done effect's result (JSON), or the failed effect's
	// error text.
	Result []byte
	// StartedAt and EndedAt are set by the store (EndedAt: zero while
	// started).
	StartedAt, EndedAt time.Time
}

// CheckEffect returns ErrInvalid, wrapped, when e cannot be begun: its key
// or machine ID is not a ValidID.
func CheckEffect(e Effect) error {
	if !ValidID(e.Key) {
		return fmt.Errorf("%w: effect key %q", ErrInvalid, e.Key)
	}
	if !ValidID(e.MachineID) {
		return fmt.Errorf("%w: machine ID %q", ErrInvalid, e.MachineID)
	}
	return nil
}

// CheckEffectEnd returns ErrInvalid, wrapped, for an outcome EndEffect
// cannot record: a key that is not a ValidID, or a status other than done
// or failed.
func CheckEffectEnd(key string, status EffectStatus) error {
	if !ValidID(key) {
		return fmt.Errorf("%w: effect key %q", ErrInvalid, key)
	}
	if status != EffectDone && status != EffectFailed {
		return fmt.Errorf("%w: effect status %q", ErrInvalid, status)
	}
	return nil
}

// TxEffectJournal is the optional capability of a Store that keeps its
// effect journal in a database the effects may write too (SQLite,
// PostgreSQL): an effect that writes only to that database runs in one
// transaction with its journal entry, and so happens once or not at all
// — no entry is ever left started, in doubt.
type TxEffectJournal interface {
	// RunEffectTx runs fn in a transaction of the store's database and
	// records e, in the same transaction, done with fn's result (JSON),
	// then commits: fn's writes and the entry commit together, or
	// neither does. tx is the store's transaction: a *sql.Tx for SQLite,
	// a pgx.Tx for PostgreSQL. An entry of e.Key that exists is returned
	// as stored, and fn does not run; ran says whether fn ran and its
	// entry committed. An error of fn rolls back both, records nothing,
	// and is returned as is. fn must use tx alone: a write to the store
	// through another connection waits for this transaction (on SQLite,
	// for ever). An empty e.Key runs fn in a transaction and journals
	// nothing (a call without an idempotency key); another key or
	// machine ID that is not a [ValidID] is ErrInvalid.
	RunEffectTx(ctx context.Context, e Effect, fn func(ctx context.Context, tx any) (result []byte, err error)) (stored Effect, ran bool, err error)
}

// CheckEffectTx returns ErrInvalid, wrapped, when RunEffectTx cannot run
// e: a key that is neither empty nor a ValidID, or (with a key) a machine
// ID that is not a ValidID.
func CheckEffectTx(e Effect) error {
	if e.Key == "" {
		return nil
	}
	return CheckEffect(e)
}
