package backend

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPackedAfter(t *testing.T) {
	for _, tc := range []struct {
		length, packed int64
		appended       int
		want           int64
	}{
		{0, 0, 0, 0},
		{0, 0, 127, 0},
		{0, 0, 128, 128},
		{100, 0, 27, 0},
		{100, 0, 28, 128},
		{300, 0, 0, 256}, // rows written before blocks
		{300, 256, 1000, 1280},
		{383, 256, 1, 384},
	} {
		if got := PackedAfter(tc.length, tc.packed, tc.appended); got != tc.want {
			t.Errorf("PackedAfter(%d, %d, %d) = %d, want %d", tc.length, tc.packed, tc.appended, got, tc.want)
		}
	}
}

func TestBlocks(t *testing.T) {
	entries := make([][]byte, BlockLen)
	for i := range entries {
		entries[i] = bytes.Repeat([]byte{byte(i)}, i*3) // 0 to 381 bytes: one- and two-byte lengths
	}
	data := PackBlock(entries)
	for _, skip := range []int{0, 1, 100, BlockLen - 1, BlockLen} {
		prefix := [][]byte{[]byte("before")}
		got, err := UnpackBlock(prefix, data, skip)
		if err != nil {
			t.Fatalf("UnpackBlock(skip %d): %v", skip, err)
		}
		if diff := cmp.Diff(append([][]byte{[]byte("before")}, entries[skip:]...), got); diff != "" {
			t.Fatalf("UnpackBlock(skip %d) (-want +got):\n%s", skip, diff)
		}
		for i, e := range got[1:] {
			if cap(e) != len(e) {
				t.Fatalf("UnpackBlock(skip %d): entry %d has room to grow into the next", skip, i)
			}
		}
	}
	for name, bad := range map[string][]byte{
		"short":     PackBlock(entries[1:]),
		"long":      PackBlock(append(entries, nil)),
		"truncated": data[:len(data)-1],
		"varint":    append(bytes.Clone(data), 0x80),
	} {
		if _, err := UnpackBlock(nil, bad, 0); err == nil {
			t.Errorf("UnpackBlock(%s) succeeded", name)
		}
	}
}

// TestPackUnpack appends histories in saves of random sizes, packing as
// a store does, and reads them back from every position.
func TestPackUnpack(t *testing.T) {
	var blocks, rows, all [][]byte
	length := int64(0)
	for save, n := range []int{0, 3, 127, 1, 300, 5, 128, 0, 200} {
		entries := make([][]byte, n)
		for i := range entries {
			entries[i] = []byte{byte(save), byte(i)}
		}
		packed := int64(len(blocks)) * BlockLen
		newBlocks, left, err := Pack(length, packed, rows, entries)
		if err != nil {
			t.Fatalf("save %d: %v", save, err)
		}
		if len(newBlocks) > 0 {
			rows = nil // packed: their rows are deleted
		}
		blocks, rows = append(blocks, newBlocks...), append(rows, left...)
		all, length = append(all, entries...), length+int64(n)
		if got, want := int64(len(blocks))*BlockLen, PackedAfter(length-int64(n), packed, n); got != want {
			t.Fatalf("save %d: %d entries in blocks, want %d", save, got, want)
		}
	}
	packed := int64(len(blocks)) * BlockLen
	for from := int64(0); from <= length; from += 37 {
		first := from / BlockLen
		got, err := Unpack(from, length, packed, blocks[min(first, int64(len(blocks))):], rows[max(0, from-packed):])
		if err != nil {
			t.Fatalf("Unpack from %d: %v", from, err)
		}
		if diff := cmp.Diff(all[from:], got); diff != "" {
			t.Fatalf("Unpack from %d (-want +got):\n%s", from, diff)
		}
	}
	if _, err := Unpack(0, length, packed, blocks[1:], rows); err == nil {
		t.Error("Unpack with a block missing succeeded")
	}
	if _, _, err := Pack(length, packed, nil, make([][]byte, BlockLen)); err == nil {
		t.Error("Pack without the stored rows succeeded")
	}
}
