package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// appendAuditSQL appends one entry: it moves the head — whose row lock
// orders concurrent appends, fleet-wide — to the entry's hash
// (store.ChainHash: SHA-256 of the previous hash and the entry) and
// inserts the entry, in one statement.
const appendAuditSQL = `WITH h AS (
		UPDATE {s}.audit_head SET seq = seq + 1, prev = hash, hash = sha256(hash || $2::bytea)
		WHERE id = 1 RETURNING seq, prev, hash)
	INSERT INTO {s}.audit_log (seq, machine_id, entry, prev, hash, sig)
	SELECT h.seq, $1, $2, h.prev, h.hash, $3 FROM h`

// appendAudit appends entries in tx, one statement each.
func (s *Store) appendAudit(ctx context.Context, tx pgx.Tx, entries []store.AuditAppend) error {
	for _, e := range entries {
		if _, err := tx.Exec(ctx, s.q.appendAudit, e.MachineID, e.Entry, backend.NonNil(e.Signature)); err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
	}
	return nil
}

// AppendAudit implements [store.AuditLog].
func (s *Store) AppendAudit(ctx context.Context, entries []store.AuditAppend) error {
	if err := store.ValidateAudit(entries); err != nil {
		return fmt.Errorf("postgres: append audit: %w", err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.appendAudit(ctx, tx, entries) })
	if err != nil {
		return fmt.Errorf("postgres: append audit: %w", err)
	}
	return nil
}

// ReadAudit implements [store.AuditLog].
func (s *Store) ReadAudit(ctx context.Context, afterSeq int64, limit int) ([]store.AuditEntry, error) {
	q := s.q.readAudit
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.pool.Query(ctx, q, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("postgres: read audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (e store.AuditEntry, err error) {
		err = r.Scan(&e.Seq, &e.MachineID, &e.Entry, &e.Prev, &e.Hash, &e.Signature)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read audit: %w", err)
	}
	return out, nil
}

// AuditHead implements [store.AuditLog].
func (s *Store) AuditHead(ctx context.Context) (seq int64, hash []byte, err error) {
	if err := s.pool.QueryRow(ctx, s.q.auditHead).Scan(&seq, &hash); err != nil {
		return 0, nil, fmt.Errorf("postgres: audit head: %w", err)
	}
	if len(hash) == 0 {
		hash = nil
	}
	return seq, hash, nil
}
