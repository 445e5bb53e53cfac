package sqlite

import (
	"context"
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
// rows and entries (backend.Pack) go into history_blocks, their rows
// deleted, and the entries left over into history rows.
func appendHistory(ctx context.Context, tx txer, machineID string, length, packed int64, entries [][]byte) error {
	var stored [][]byte
	if after := backend.PackedAfter(length, packed, len(entries)); after > packed {
		var err error
		if stored, err = dataRows(ctx, tx, "history", machineID, packed, after); err != nil {
			return err
		}
	}
	blocks, rows, err := backend.Pack(length, packed, stored, entries)
	if err != nil {
		return err
	}
	for i, data := range blocks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO history_blocks (machine_id, seq, data) VALUES (?, ?, ?)`,
			machineID, packed+int64(i)*backend.BlockLen, data); err != nil {
			return err
		}
	}
	if len(stored) > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM history WHERE machine_id = ? AND seq >= ? AND seq < ?`,
			machineID, packed, packed+int64(len(stored))); err != nil {
			return err
		}
	}
	return insertRows(ctx, tx, machineID, max(length, packed+int64(len(blocks))*backend.BlockLen), rows)
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

// dataRows returns the data column of the machine's rows of table
// (history, or history_blocks) with a sequence number from from to before
// to, in order.
func dataRows(ctx context.Context, tx txer, table, machineID string, from, to int64) ([][]byte, error) {
	rows, err := tx.QueryContext(ctx, `SELECT data FROM `+table+` WHERE machine_id = ? AND seq >= ? AND seq < ? ORDER BY seq`, machineID, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
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
	var blocks [][]byte
	if from < packed {
		var err error
		if blocks, err = dataRows(ctx, tx, "history_blocks", machineID, from/backend.BlockLen*backend.BlockLen, packed); err != nil {
			return nil, err
		}
	}
	rows, err := dataRows(ctx, tx, "history", machineID, max(from, packed), length)
	if err != nil {
		return nil, err
	}
	return backend.Unpack(from, length, packed, blocks, rows)
}
