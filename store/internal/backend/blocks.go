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
// entries is an error.
func UnpackBlock(out [][]byte, data []byte, skip int) ([][]byte, error) {
	i := 0
	for ; len(data) > 0; i++ {
		n, size := binary.Uvarint(data)
		if size <= 0 || n > uint64(len(data)-size) {
			return nil, errors.New("corrupt entry length")
		}
		end := size + int(n)
		if i >= skip {
			out = append(out, data[size:end:end])
		}
		data = data[end:]
	}
	if i != BlockLen {
		return nil, fmt.Errorf("%d entries, want %d", i, BlockLen)
	}
	return out, nil
}
