package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/markov-agents/markov/store"
)

// AddSuspendRequest implements [store.SuspendRequester].
func (s *Store) AddSuspendRequest(ctx context.Context, r store.SuspendRequest) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("sqlite: add suspend request: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM machines WHERE id = ?)`, r.MachineID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("machine %q: %w", r.MachineID, store.ErrNotFound)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO suspend_requests (id, machine_id, body, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`, r.ID, r.MachineID, append([]byte{}, r.Body...), s.now().UnixMicro())
		if err != nil {
			return err
		}
		return someRows(res, store.ErrConflict)
	})
	if err != nil {
		return fmt.Errorf("sqlite: add suspend request %q: %w", r.ID, err)
	}
	return nil
}

// SuspendRequests implements [store.SuspendRequester].
func (s *Store) SuspendRequests(ctx context.Context, machineID string) ([]store.SuspendRequest, error) {
	rows, err := s.stmts.QueryContext(ctx, `SELECT id, body, created_at FROM suspend_requests WHERE machine_id = ? ORDER BY created_at, id`, machineID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: suspend requests of %q: %w", machineID, err)
	}
	defer rows.Close()
	var out []store.SuspendRequest
	for rows.Next() {
		r := store.SuspendRequest{MachineID: machineID}
		var at sql.NullInt64
		if err := rows.Scan(&r.ID, &r.Body, &at); err != nil {
			return nil, fmt.Errorf("sqlite: suspend requests of %q: %w", machineID, err)
		}
		r.CreatedAt = fromMicros(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: suspend requests of %q: %w", machineID, err)
	}
	return out, nil
}

// DropSuspendRequest implements [store.SuspendRequester].
func (s *Store) DropSuspendRequest(ctx context.Context, machineID, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM suspend_requests WHERE machine_id = ? AND id = ?`, machineID, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: drop suspend request %q: %w", id, err)
	}
	return nil
}
