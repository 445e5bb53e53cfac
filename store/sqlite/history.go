package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/markov-agents/markov/store/internal/backend"
)

// A machine's history is kept in two tables, in the format of package
// backend (backend.PackBlock): its first entries packed in
// history_blocks, backend.BlockLen to a row; the rest in history, one row
// each. machines.packed counts the entries in blocks, always a multiple
// of backend.BlockLen.

// appendHistory appends entries to the machine's history of length
// entries, the first packed of them in blocks: the whole blocks of the
// rows and entries (backend.PackedAfter) go into history_blocks, their rows
// deleted, and the entries left over into history rows.
func appendHistory(ctx context.Context, tx txer, machineID string, length, packed int64, entries [][]byte) error {
	after := backend.PackedAfter(length, packed, len(entries))
	if after > packed {
		// The rows that go into blocks: all of them, but in a database
		// written before blocks, whose rows may fill more than one.
		stored, err := historyRows(ctx, tx, machineID, packed, after, nil)
		if err != nil {
			return err
		}
		if want := min(length, after) - packed; int64(len(stored)) != want {
			return fmt.Errorf("history rows from %d: %d, want %d", packed, len(stored), want)
		}
		all := append(stored, entries...)
		for seq := packed; seq < after; seq += backend.BlockLen {
			if _, err := tx.ExecContext(ctx, `INSERT INTO history_blocks (machine_id, seq, data) VALUES (?, ?, ?)`,
				machineID, seq, backend.PackBlock(all[seq-packed:seq-packed+backend.BlockLen])); err != nil {
				return err
			}
		}
		if len(stored) > 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM history WHERE machine_id = ? AND seq >= ? AND seq < ?`,
				machineID, packed, packed+int64(len(stored))); err != nil {
				return err
			}
		}
		entries = all[after-packed:]
	}
	return insertRows(ctx, tx, machineID, max(length, after), entries)
}

// insertRows inserts entries as history rows from sequence number base
// on, maxHistoryRows per statement.
func insertRows(ctx context.Context, tx txer, machineID string, base int64, entries [][]byte) error {
	for start := 0; start < len(entries); start += maxHistoryRows {
		chunk := entries[start:min(start+maxHistoryRows, len(entries))]
		var q strings.Builder
		q.WriteString(`INSERT INTO history (machine_id, seq, data) VALUES `)
		args := make([]any, 0, 3*len(chunk))
		for i, e := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?)")
			args = append(args, machineID, base+int64(start+i), backend.NonNil(e))
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// historyRows appends to out the machine's history rows from sequence
// number from to before to.
func historyRows(ctx context.Context, tx txer, machineID string, from, to int64, out [][]byte) ([][]byte, error) {
	rows, err := tx.QueryContext(ctx, `SELECT data FROM history WHERE machine_id = ? AND seq >= ? AND seq < ? ORDER BY seq`, machineID, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, backend.NonNil(b))
	}
	return out, rows.Err()
}

// readHistory returns the entries of the machine's history from from on,
// of its length entries, the first packed of them in blocks.
func readHistory(ctx context.Context, tx txer, machineID string, from, length, packed int64) ([][]byte, error) {
	out := make([][]byte, 0, length-from)
	var err error
	if from < packed {
		if out, err = readBlocks(ctx, tx, machineID, from, packed, out); err != nil {
			return nil, err
		}
	}
	if out, err = historyRows(ctx, tx, machineID, max(from, packed), length, out); err != nil {
		return nil, err
	}
	if int64(len(out)) != length-from {
		return nil, fmt.Errorf("history from %d holds %d entries, want %d", from, len(out), length-from)
	}
	return out, nil
}

// readBlocks appends to out the entries from from on of the machine's
// blocks, which hold its first packed entries.
func readBlocks(ctx context.Context, tx txer, machineID string, from, packed int64, out [][]byte) ([][]byte, error) {
	first := from / backend.BlockLen * backend.BlockLen
	rows, err := tx.QueryContext(ctx, `SELECT seq, data FROM history_blocks WHERE machine_id = ? AND seq >= ? AND seq < ? ORDER BY seq`, machineID, first, packed)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	next := first
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, err
		}
		if seq != next {
			return nil, fmt.Errorf("history block at %d, want one at %d", seq, next)
		}
		if out, err = backend.UnpackBlock(out, data, int(max(0, from-seq))); err != nil {
			return nil, fmt.Errorf("history block at %d: %w", seq, err)
		}
		next += backend.BlockLen
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if next != packed {
		return nil, fmt.Errorf("history blocks end at %d, want %d", next, packed)
	}
	return out, nil
}
