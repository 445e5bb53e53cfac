package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// Park implements [store.Parker]. The machine's row stays locked until
// the park commits, so concurrent parks of a machine add their errors one
// after the other.
func (s *Store) Park(ctx context.Context, machineID, reason string, at time.Time) error {
	if err := store.CheckID(machineID); err != nil {
		return fmt.Errorf("postgres: park machine %q: %w", machineID, err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rev int64
		var was *int64
		var errs []string
		err := tx.QueryRow(ctx, s.q.expand(`SELECT m.revision, p.revision, p.errors FROM {s}.machines m
			LEFT JOIN {s}.parked p ON p.machine_id = m.id WHERE m.id = $1 FOR UPDATE OF m`), machineID).Scan(&rev, &was, &errs)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if was == nil || *was != rev {
			errs = nil
		}
		errs = backend.Parked(errs, reason)
		if _, err := tx.Exec(ctx, s.q.expand(`INSERT INTO {s}.parked (machine_id, revision, errors, at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (machine_id) DO UPDATE SET revision = EXCLUDED.revision, errors = EXCLUDED.errors, at = EXCLUDED.at`),
			machineID, rev, errs, at); err != nil {
			return err
		}
		return s.feedMachine(ctx, tx, machineID, store.MachineChange{Event: store.MachineParked, Revision: rev, Errors: errs})
	})
	if err != nil {
		return fmt.Errorf("postgres: park machine %q: %w", machineID, err)
	}
	return nil
}

// ListParked implements [store.Parker].
func (s *Store) ListParked(ctx context.Context, limit int) ([]store.ParkedMachine, error) {
	rows, err := s.pool.Query(ctx, s.q.expand(`SELECT p.machine_id, p.errors, p.at FROM {s}.parked p
		JOIN {s}.machines m ON m.id = p.machine_id WHERE m.revision = p.revision
		ORDER BY p.at DESC, p.machine_id LIMIT $1`), limitOrAll(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: list parked: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ParkedMachine, error) {
		var p store.ParkedMachine
		err := row.Scan(&p.MachineID, &p.Errors, &p.At)
		p.At = p.At.UTC()
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list parked: %w", err)
	}
	return out, nil
}
