package backend

import (
	"bytes"
	"errors"
	"testing"
)

// blockSep separates the blocks of FuzzUnpack's blocks argument; the
// seeds' entries never hold its bytes.
var blockSep = []byte{0xff, 0xfe}

// FuzzUnpack checks that Unpack, given a machine row's counts and the
// block and row data read back from a database, whatever their bytes and
// however they disagree, returns an error wrapping ErrCorrupt or exactly
// length-from entries, and never panics or allocates for entries the data
// cannot hold.
func FuzzUnpack(f *testing.F) {
	entries := make([][]byte, 3*BlockLen+5)
	for i := range entries {
		entries[i] = bytes.Repeat([]byte{byte(i % 200)}, i%7)
	}
	block := PackBlock(entries[:BlockLen])
	second := PackBlock(entries[BlockLen : 2*BlockLen])
	two := bytes.Join([][]byte{block, second}, blockSep)
	f.Add(int64(0), int64(0), int64(0), []byte(nil), uint16(0))
	f.Add(int64(0), int64(5), int64(0), []byte(nil), uint16(5))
	f.Add(int64(0), int64(BlockLen), int64(BlockLen), block, uint16(0))
	f.Add(int64(3), int64(BlockLen+2), int64(BlockLen), block, uint16(2))
	f.Add(int64(130), int64(2*BlockLen+9), int64(2*BlockLen), second, uint16(9))
	f.Add(int64(0), int64(2*BlockLen+9), int64(2*BlockLen), two, uint16(9))
	f.Add(int64(0), int64(2*BlockLen), int64(2*BlockLen), two, uint16(0))
	// Malformed: truncated, a bad varint, counts that disagree, negative
	// or huge lengths.
	f.Add(int64(0), int64(BlockLen), int64(BlockLen), block[:len(block)-1], uint16(0))
	f.Add(int64(0), int64(BlockLen), int64(BlockLen), append(bytes.Clone(block), 0x80), uint16(0))
	f.Add(int64(0), int64(-1), int64(BlockLen), block, uint16(0))
	f.Add(int64(0), int64(1)<<62, int64(BlockLen), block, uint16(0))
	f.Add(int64(-1), int64(BlockLen), int64(BlockLen), block, uint16(0))
	f.Add(int64(0), int64(BlockLen), int64(-BlockLen), block, uint16(0))
	f.Add(int64(0), int64(BlockLen+1), int64(BlockLen+1), block, uint16(1))
	f.Fuzz(func(t *testing.T, from, length, packed int64, data []byte, nrows uint16) {
		var blocks [][]byte
		if len(data) > 0 {
			blocks = bytes.Split(data, blockSep)
		}
		rows := make([][]byte, nrows)
		for i := range rows {
			rows[i] = []byte{byte(i)}
		}
		got, err := Unpack(from, length, packed, blocks, rows)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Unpack(%d, %d, %d): %v, not ErrCorrupt", from, length, packed, err)
			}
			return
		}
		if int64(len(got)) != length-from {
			t.Fatalf("Unpack(%d, %d, %d): %d entries, want %d", from, length, packed, len(got), length-from)
		}
		for i, e := range got {
			if e == nil {
				t.Fatalf("Unpack(%d, %d, %d): entry %d is nil", from, length, packed, i)
			}
		}
	})
}
