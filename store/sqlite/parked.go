package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// Park implements [store.Parker].
func (s *Store) Park(ctx context.Context, machineID, reason string, at time.Time) error {
	if err := store.CheckID(machineID); err != nil {
		return fmt.Errorf("sqlite: park machine %q: %w", machineID, err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var rev int64
		if err := tx.QueryRowContext(ctx, `SELECT revision FROM machines WHERE id = ?`, machineID).Scan(&rev); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		}
		var errs []string
		var was int64
		var raw []byte
		switch err := tx.QueryRowContext(ctx, `SELECT revision, errors FROM parked WHERE machine_id = ?`, machineID).Scan(&was, &raw); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case was == rev:
			_ = json.Unmarshal(raw, &errs) // our own encoding; a bad one starts over
		}
		errs = backend.Parked(errs, reason)
		b, err := json.Marshal(errs)
		if err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `INSERT INTO parked (machine_id, revision, errors, at) VALUES (?, ?, ?, ?)
			ON CONFLICT (machine_id) DO UPDATE SET revision = excluded.revision, errors = excluded.errors, at = excluded.at`,
			machineID, rev, b, at.UnixMicro()); err != nil {
			return err
		}
		return feedMachine(ctx, tx, machineID, store.MachineChange{Event: store.MachineParked, Revision: rev, Errors: errs}, s.now().UnixMicro())
	})
	if err != nil {
		return fmt.Errorf("sqlite: park machine %q: %w", machineID, err)
	}
	s.hub.Notify(feedKey)
	return nil
}

// ListParked implements [store.Parker].
func (s *Store) ListParked(ctx context.Context, limit int) ([]store.ParkedMachine, error) {
	if limit <= 0 {
		limit = -1 // no limit
	}
	rows, err := s.db.QueryContext(ctx, `SELECT p.machine_id, p.errors, p.at FROM parked p JOIN machines m ON m.id = p.machine_id
		WHERE m.revision = p.revision ORDER BY p.at DESC, p.machine_id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list parked: %w", err)
	}
	defer rows.Close()
	var out []store.ParkedMachine
	for rows.Next() {
		var p store.ParkedMachine
		var raw []byte
		var at int64
		if err := rows.Scan(&p.MachineID, &raw, &at); err != nil {
			return nil, fmt.Errorf("sqlite: list parked: %w", err)
		}
		_ = json.Unmarshal(raw, &p.Errors) // our own encoding
		p.At = time.UnixMicro(at).UTC()
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list parked: %w", err)
	}
	return out, nil
}

var _ store.Parker = (*Store)(nil)
