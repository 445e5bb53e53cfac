package backend

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The stores on a database keep a machine's history in two tables: its
// first entries packed in blocks, BlockLen to a row, each entry after its
// length (a uvarint); the rest one row each. The machine's row counts the
// entries in blocks (packed), always a multiple of BlockLen. A save that
// brings the single rows to BlockLen or more packs them, so a load reads a
// row per BlockLen entries and fewer than BlockLen single rows: per-row
// costs, which dominate reading one row per entry, do not grow with the
// history.

// BlockLen is how many history entries one block holds.
const BlockLen = 128

// ErrCorrupt reports history data read back from a database that does not
// add up: a block that does not decode to BlockLen entries, missing or
// extra blocks or rows, or counts that cannot be (negative, or the packed
// entries not whole blocks of the history).
var ErrCorrupt = errors.New("backend: corrupt history")

// PackedAfter returns how many entries of a history of length entries,
// the first packed of them in blocks, are in blocks after a save appends
// appended more.
func PackedAfter(length, packed int64, appended int) int64 {
	return packed + (length-packed+int64(appended))/BlockLen*BlockLen
}

// PackBlock returns entries (BlockLen of them) as a block's data: each
// after its length, a uvarint.
func PackBlock(entries [][]byte) []byte {
	n := 0
	for _, e := range entries {
		n += binary.MaxVarintLen32 + len(e)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// UnpackBlock appends to out the entries of a block's data but the first
// skip, each a capped slice of data. A block that does not hold BlockLen
// entries is an error wrapping ErrCorrupt.
func UnpackBlock(out [][]byte, data []byte, skip int) ([][]byte, error) {
	i := 0
	for ; len(data) > 0; i++ {
		n, size := binary.Uvarint(data)
		if size <= 0 || n > uint64(len(data)-size) {
			return nil, fmt.Errorf("%w: entry %d: bad length", ErrCorrupt, i)
		}
		end := size + int(n)
		if i >= skip {
			out = append(out, data[size:end:end])
		}
		data = data[end:]
	}
	if i != BlockLen {
		return nil, fmt.Errorf("%w: %d entries in a block, want %d", ErrCorrupt, i, BlockLen)
	}
	return out, nil
}

// Pack splits what a save appends to a history of length entries, the
// first packed of them in blocks, into the blocks to write from entry
// packed on and the entries left over as rows, from entry
// max(length, packed+len(blocks)*BlockLen) on. stored are the history's
// rows that go into blocks when the save packs (PackedAfter): all of
// them, but in a database written before blocks, those of whole blocks.
func Pack(length, packed int64, stored, entries [][]byte) (blocks, rows [][]byte, err error) {
	after := PackedAfter(length, packed, len(entries))
	if after == packed {
		return nil, entries, nil
	}
	if want := min(length, after) - packed; int64(len(stored)) != want {
		return nil, nil, fmt.Errorf("history rows from %d: %d, want %d", packed, len(stored), want)
	}
	all := append(stored[:len(stored):len(stored)], entries...)
	for i := int64(0); i < after-packed; i += BlockLen {
		blocks = append(blocks, PackBlock(all[i:i+BlockLen]))
	}
	return blocks, all[after-packed:], nil
}

// Unpack returns the entries from from on of a history of length entries,
// the first packed of them in blocks, read as blocks, the data of those
// from the one holding entry from on, in order, and rows, the rows after
// the blocks from from on, in order. Missing or extra blocks or entries,
// and counts that cannot be, are an error wrapping ErrCorrupt.
func Unpack(from, length, packed int64, blocks, rows [][]byte) ([][]byte, error) {
	if from < 0 || from > length || packed < 0 || packed > length || packed%BlockLen != 0 {
		return nil, fmt.Errorf("%w: history from %d of %d entries, %d of them in blocks", ErrCorrupt, from, length, packed)
	}
	first, want := from/BlockLen*BlockLen, int64(0)
	if first < packed {
		want = (packed - first) / BlockLen
	}
	if int64(len(blocks)) != want {
		return nil, fmt.Errorf("%w: %d history blocks from %d, want %d", ErrCorrupt, len(blocks), first, want)
	}
	for i, e := range rows {
		rows[i] = NonNil(e)
	}
	out := rows
	if len(blocks) > 0 {
		// The data holds at most this many entries, whatever length says.
		out = make([][]byte, 0, min(length-from, int64(len(blocks))*BlockLen+int64(len(rows))))
		for i, data := range blocks {
			seq := first + int64(i)*BlockLen
			var err error
			if out, err = UnpackBlock(out, data, int(max(0, from-seq))); err != nil {
				return nil, fmt.Errorf("history block at %d: %w", seq, err)
			}
		}
		out = append(out, rows...)
	}
	if int64(len(out)) != length-from {
		return nil, fmt.Errorf("%w: history from %d holds %d entries, want %d", ErrCorrupt, from, len(out), length-from)
	}
	return out, nil
}
