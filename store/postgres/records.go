package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// PutRecord implements [store.RecordKeeper]: one statement, an insert
// or an update on the version.
func (s *Store) PutRecord(ctx context.Context, r store.Record, prev int64) (int64, error) {
	if err := store.CheckRecord(r, prev); err != nil {
		return 0, fmt.Errorf("postgres: put record: %w", err)
	}
	q := `INSERT INTO {s}.records (kind, key, data, version, updated_at) VALUES ($1, $2, $3, 1, now())
		ON CONFLICT (kind, key) DO NOTHING RETURNING version`
	args := []any{r.Kind, r.Key, backend.NonNil(r.Data)}
	if prev != 0 {
		q = `UPDATE {s}.records SET data = $3, version = version + 1, updated_at = now()
			WHERE kind = $1 AND key = $2 AND version = $4 RETURNING version`
		args = append(args, prev)
	}
	var v int64
	err := s.pool.QueryRow(ctx, s.q.expand(q), args...).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrConflict
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: put record %s/%s: %w", r.Kind, r.Key, err)
	}
	return v, nil
}

// GetRecord implements [store.RecordKeeper].
func (s *Store) GetRecord(ctx context.Context, kind, key string) (store.Record, error) {
	r := store.Record{Kind: kind, Key: key}
	err := s.pool.QueryRow(ctx, s.q.expand(`SELECT data, version, updated_at FROM {s}.records WHERE kind = $1 AND key = $2`),
		kind, key).Scan(&r.Data, &r.Version, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("postgres: record %s/%s: %w", kind, key, err)
	}
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r, nil
}

// ListRecords implements [store.RecordKeeper].
func (s *Store) ListRecords(ctx context.Context, kind, prefix string) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, s.q.expand(`SELECT key, data, version, updated_at FROM {s}.records
		WHERE kind = $1 AND left(key, length($2::text)) = $2::text ORDER BY key COLLATE "C"`), kind, prefix)
	if err != nil {
		return nil, fmt.Errorf("postgres: records %s: %w", kind, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Record, error) {
		r := store.Record{Kind: kind}
		err := row.Scan(&r.Key, &r.Data, &r.Version, &r.UpdatedAt)
		r.UpdatedAt = r.UpdatedAt.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: records %s: %w", kind, err)
	}
	return out, nil
}

// DeleteRecord implements [store.RecordKeeper].
func (s *Store) DeleteRecord(ctx context.Context, kind, key string) error {
	if _, err := s.pool.Exec(ctx, s.q.expand(`DELETE FROM {s}.records WHERE kind = $1 AND key = $2`), kind, key); err != nil {
		return fmt.Errorf("postgres: delete record %s/%s: %w", kind, key, err)
	}
	return nil
}
