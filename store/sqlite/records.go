package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// PutRecord implements [store.RecordKeeper].
func (s *Store) PutRecord(ctx context.Context, r store.Record, prev int64) (int64, error) {
	if err := store.CheckRecord(r, prev); err != nil {
		return 0, fmt.Errorf("sqlite: put record: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		if prev == 0 {
			res, err = tx.ExecContext(ctx, `INSERT INTO records (kind, key, data, version, updated_at) VALUES (?, ?, ?, 1, ?)
				ON CONFLICT (kind, key) DO NOTHING`, r.Kind, r.Key, backend.NonNil(r.Data), s.now().UnixMicro())
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE records SET data = ?, version = version + 1, updated_at = ? WHERE kind = ? AND key = ? AND version = ?`,
				backend.NonNil(r.Data), s.now().UnixMicro(), r.Kind, r.Key, prev)
		}
		if err != nil {
			return err
		}
		return someRows(res, store.ErrConflict)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: put record %s/%s: %w", r.Kind, r.Key, err)
	}
	return prev + 1, nil
}

// GetRecord implements [store.RecordKeeper].
func (s *Store) GetRecord(ctx context.Context, kind, key string) (store.Record, error) {
	r := store.Record{Kind: kind, Key: key}
	var at sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT data, version, updated_at FROM records WHERE kind = ? AND key = ?`, kind, key).Scan(&r.Data, &r.Version, &at)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("sqlite: record %s/%s: %w", kind, key, err)
	}
	r.UpdatedAt = fromMicros(at)
	return r, nil
}

// ListRecords implements [store.RecordKeeper].
func (s *Store) ListRecords(ctx context.Context, kind, prefix string) ([]store.Record, error) {
	// substr of blobs compares bytes: LIKE would need escaping and
	// folds case.
	rows, err := s.stmts.QueryContext(ctx, `SELECT key, data, version, updated_at FROM records
		WHERE kind = ? AND substr(CAST(key AS BLOB), 1, length(CAST(? AS BLOB))) = CAST(? AS BLOB) ORDER BY key`, kind, prefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("sqlite: records %s: %w", kind, err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r := store.Record{Kind: kind}
		var at sql.NullInt64
		if err := rows.Scan(&r.Key, &r.Data, &r.Version, &at); err != nil {
			return nil, fmt.Errorf("sqlite: records %s: %w", kind, err)
		}
		r.UpdatedAt = fromMicros(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: records %s: %w", kind, err)
	}
	return out, nil
}

// DeleteRecord implements [store.RecordKeeper].
func (s *Store) DeleteRecord(ctx context.Context, kind, key string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM records WHERE kind = ? AND key = ?`, kind, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete record %s/%s: %w", kind, key, err)
	}
	return nil
}
