package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/store"
)

// AddSuspendRequest implements [store.SuspendRequester]: one statement
// that inserts the request if the machine exists.
func (s *Store) AddSuspendRequest(ctx context.Context, r store.SuspendRequest) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("postgres: add suspend request: %w", err)
	}
	var ok bool
	err := s.pool.QueryRow(ctx, s.q.addRequest, r.ID, r.MachineID, append([]byte{}, r.Body...)).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		// Not inserted: the ID is taken, or the machine is missing.
		var exists bool
		if err := s.pool.QueryRow(ctx, s.q.expand(`SELECT EXISTS (SELECT 1 FROM {s}.machines WHERE id = $1)`), r.MachineID).Scan(&exists); err != nil {
			return fmt.Errorf("postgres: add suspend request %q: %w", r.ID, err)
		}
		err = store.ErrConflict
		if !exists {
			err = fmt.Errorf("machine %q: %w", r.MachineID, store.ErrNotFound)
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: add suspend request %q: %w", r.ID, err)
	}
	return nil
}

// SuspendRequests implements [store.SuspendRequester].
func (s *Store) SuspendRequests(ctx context.Context, machineID string) ([]store.SuspendRequest, error) {
	rows, err := s.pool.Query(ctx, s.q.requests, machineID)
	if err != nil {
		return nil, fmt.Errorf("postgres: suspend requests of %q: %w", machineID, err)
	}
	var out []store.SuspendRequest
	var r store.SuspendRequest
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Body, &at}, func() error {
		r.MachineID, r.CreatedAt = machineID, at.UTC().Truncate(store.TimePrecision)
		r.Body = append([]byte(nil), r.Body...)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: suspend requests of %q: %w", machineID, err)
	}
	return out, nil
}

// DropSuspendRequest implements [store.SuspendRequester].
func (s *Store) DropSuspendRequest(ctx context.Context, machineID, id string) error {
	if _, err := s.pool.Exec(ctx, s.q.dropRequest, machineID, id); err != nil {
		return fmt.Errorf("postgres: drop suspend request %q: %w", id, err)
	}
	return nil
}
