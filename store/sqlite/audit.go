package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	sqlitedrv "modernc.org/sqlite"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// chainFunc is the SQL function that computes an audit entry's hash,
// store.ChainHash, so that an append reads the head and writes the entry
// in one statement.
const chainFunc = "markov_audit_chain"

func init() {
	if err := sqlitedrv.RegisterDeterministicScalarFunction(chainFunc, 2, func(_ *sqlitedrv.FunctionContext, args []driver.Value) (driver.Value, error) {
		return store.ChainHash(blob(args[0]), blob(args[1])), nil
	}); err != nil {
		panic(err)
	}
}

// blob is an SQL value as bytes (NULL: none).
func blob(v driver.Value) []byte {
	switch b := v.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	}
	return nil
}

// appendAuditSQL appends one entry after the head, which a trigger then
// moves to it.
const appendAuditSQL = `INSERT INTO audit_log (seq, machine_id, entry, prev, hash, sig)
	SELECT seq + 1, ?, ?, hash, ` + chainFunc + `(hash, ?), ? FROM audit_head WHERE id = 1`

// appendAudit appends entries in tx, one statement each.
func appendAudit(ctx context.Context, tx txer, entries []store.AuditAppend) error {
	for _, e := range entries {
		if _, err := tx.ExecContext(ctx, appendAuditSQL, e.MachineID, e.Entry, e.Entry, backend.NonNil(e.Signature)); err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
	}
	return nil
}

// AppendAudit implements [store.AuditLog].
func (s *Store) AppendAudit(ctx context.Context, entries []store.AuditAppend) error {
	if err := store.ValidateAudit(entries); err != nil {
		return fmt.Errorf("sqlite: append audit: %w", err)
	}
	if err := s.writeOn(ctx, false, func(tx *sql.Tx) error { return appendAudit(ctx, tx, entries) }); err != nil {
		return fmt.Errorf("sqlite: append audit: %w", err)
	}
	return nil
}

// ReadAudit implements [store.AuditLog].
func (s *Store) ReadAudit(ctx context.Context, afterSeq int64, limit int) ([]store.AuditEntry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, machine_id, entry, prev, hash, sig FROM audit_log WHERE seq > ? ORDER BY seq`+limitClause(limit), afterSeq)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read audit: %w", err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		var e store.AuditEntry
		if err := rows.Scan(&e.Seq, &e.MachineID, &e.Entry, &e.Prev, &e.Hash, &e.Signature); err != nil {
			return nil, fmt.Errorf("sqlite: read audit: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read audit: %w", err)
	}
	return out, nil
}

// AuditHead implements [store.AuditLog].
func (s *Store) AuditHead(ctx context.Context) (seq int64, hash []byte, err error) {
	if err := s.db.QueryRowContext(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash); err != nil {
		return 0, nil, fmt.Errorf("sqlite: audit head: %w", err)
	}
	if len(hash) == 0 {
		hash = nil
	}
	return seq, hash, nil
}
