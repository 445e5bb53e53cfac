package instance

import (
	"context"
	"encoding/json"
	"time"
)

// EffectJournal is a machine's journal of external effects, as the
// handlers' effects (node.Effect, command.Effect) reach it: a durable
// runner backs it with its store (store.EffectJournal), bound to the
// machine. Keys are the call's idempotency key and the effect's name.
type EffectJournal interface {
	// BeginEffect records the effect as started unless an entry of key
	// exists; it returns the entry and whether this call created it.
	BeginEffect(ctx context.Context, key, name, digest string) (entry JournalEntry, created bool, err error)
	// EndEffect records a started effect's outcome: its result (JSON), or
	// with failed its error's text.
	EndEffect(ctx context.Context, key string, failed bool, result []byte) error
	// ForgetEffect deletes the entry of key: the next BeginEffect creates
	// it again.
	ForgetEffect(ctx context.Context, key string) error
}

// TxJournal is the optional capability of an EffectJournal whose store
// runs an effect in its own database transaction, with its journal entry
// (node.EffectTx): the effect and its entry commit together or not at
// all.
type TxJournal interface {
	// RunEffectTx runs fn in a transaction of the store's database (tx is
	// a *sql.Tx for SQLite, a pgx.Tx for PostgreSQL) that records the
	// effect done with fn's result (JSON), unless an entry of key exists:
	// then it returns the entry, and fn does not run. ran says whether fn
	// ran and committed. An error of fn rolls back its writes and the
	// entry, and is returned as is. A journal whose store runs no
	// transactions returns ErrEffectTx. An empty key runs fn in a
	// transaction and journals nothing.
	RunEffectTx(ctx context.Context, key, name, digest string, fn func(ctx context.Context, tx any) ([]byte, error)) (entry JournalEntry, ran bool, err error)
}

// JournalEntry is an effect as the journal holds it.
type JournalEntry struct {
	// Status is "started", "done" or "failed".
	Status string
	// Digest is the digest of the input the effect started with.
	Digest string
	// Result is a done effect's result (JSON) or a failed one's error
	// text.
	Result    []byte
	StartedAt time.Time
}

// The statuses of a JournalEntry.
const (
	EffectStarted = "started"
	EffectDone    = "done"
	EffectFailed  = "failed"
)

// InDoubt is the metadata of an in-doubt suspension: an effect whose
// journal entry says it started, and not that it ended — its process died
// in between — and that its reconcile hook could not settle. A person
// decides with an InDoubtDecision; the call then runs again, and the
// effect acts on the decision.
type InDoubt struct {
	// Effect is the effect's name, Key its journal key, Digest the
	// digest of its input.
	Effect string `json:"effect"`
	Key    string `json:"key"`
	Digest string `json:"digest,omitempty"`
	// StartedAt is when it started; Reconcile, why its hook could not
	// tell (empty without a hook).
	StartedAt time.Time `json:"started_at"`
	Reconcile string    `json:"reconcile,omitempty"`
}

// InDoubtKey is the metadata key an in-doubt suspension's InDoubt is
// under.
const InDoubtKey = "markov_in_doubt"

// InDoubtDecision is the payload that settles an in-doubt suspension:
// Decision "retry" (the effect did not happen: run it again), "done" (it
// happened: Result is its result, as JSON the effect's type decodes) or
// "fail" (give the call up: Error is the error it fails with).
type InDoubtDecision struct {
	Decision string          `json:"decision"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// InDoubtSchema is the payload schema of an in-doubt suspension.
const InDoubtSchema = `{"type":"object","properties":{` +
	`"decision":{"type":"string","enum":["retry","done","fail"],"description":"retry: it did not happen, run it again; done: it happened, with result; fail: give the call up, with error"},` +
	`"result":{"description":"for done: the effect's result"},` +
	`"error":{"type":"string","description":"for fail: the error the call fails with"}},` +
	`"required":["decision"],"additionalProperties":false}`

// InDoubtOf returns the InDoubt of a suspension's metadata, if it is an
// in-doubt suspension.
func InDoubtOf(metadata json.RawMessage) (InDoubt, bool) {
	if len(metadata) == 0 || metadata[0] != '{' {
		return InDoubt{}, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil || m[InDoubtKey] == nil {
		return InDoubt{}, false
	}
	var d InDoubt
	if json.Unmarshal(m[InDoubtKey], &d) != nil || d.Key == "" {
		return InDoubt{}, false
	}
	return d, true
}
