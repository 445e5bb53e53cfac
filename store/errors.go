package store

import (
	"errors"
	"fmt"
)

// Errors reported by every [Store]. Implementations wrap them with context
// (the machine or suspend ID); test with [errors.Is].
var (
	// ErrNotFound reports a machine or suspension that does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict reports a save whose base revision is not the stored one:
	// another writer saved (or deleted, or created) the machine first. Nothing
	// was written; reload and retry, or give up.
	ErrConflict = errors.New("store: revision conflict")
	// ErrInvalid reports a malformed request (a machine or suspend ID that
	// is not a [ValidID], a status that is not one of [Statuses], a negative revision, duplicate suspend IDs in one save, a
	// non-positive lease) or a suspend ID already owned by another machine.
	// Nothing was written; retrying the same request fails again.
	ErrInvalid = errors.New("store: invalid request")
	// ErrUnknownStatus reports a suspension status that is not one of
	// [Statuses], in a save, a filter or [ParseStatus]. Such errors wrap
	// [ErrInvalid] too.
	ErrUnknownStatus = errors.New("store: unknown suspension status")
	// ErrSchemaVersion reports, from [Pinger.Ping], a database whose schema
	// is not the version this process's store writes (another process
	// migrated it since): the process should be replaced by a newer one.
	ErrSchemaVersion = errors.New("store: schema version is not current")
)

// ErrAuditBroken reports an audit log whose hash chain does not hold
// ([VerifyAudit]): an entry changed, removed or reordered.
var ErrAuditBroken = errors.New("store: audit log chain broken")

// AuditError reports where an audit log's chain breaks.
type AuditError struct {
	// Seq is the entry at fault (or after which the log was cut).
	Seq int64
	// Problem says what is wrong, short.
	Problem string
}

// Error names the entry and the problem.
func (e *AuditError) Error() string {
	return fmt.Sprintf("store: audit log chain broken at entry %d: %s", e.Seq, e.Problem)
}

// Unwrap returns ErrAuditBroken.
func (e *AuditError) Unwrap() error { return ErrAuditBroken }

// ErrRuleSpent is returned by [RuleUses.UseRule] when a rule has no use
// left.
var ErrRuleSpent = errors.New("store: rule has no use left")
