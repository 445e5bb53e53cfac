package serialize

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/markov-agents/markov/machine"
)

// Fuzzing: decoding arbitrary input must never panic, hang or allocate
// without bound; whatever decodes must encode again and decode to the
// same machine. The golden files seed the corpus; crashers found are kept
// in testdata/fuzz as regression seeds.

// seeds adds the golden files of every version with extension ext, and a
// kitchen-sink machine encoded with marshal.
func seeds(f *testing.F, ext string, marshal func(*machine.Machine) ([]byte, error)) {
	files, err := filepath.Glob(filepath.Join("testdata", "v*", "*"+ext))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(must(marshal(kitchenSinkN(f, 60))))
}

// resealed returns data with a valid checksum, so mutations reach the
// body decoder instead of failing the checksum.
func resealed(data []byte) []byte {
	if len(data) < headerSize {
		return data
	}
	return seal(append([]byte(nil), data...))
}

var fuzzOpts = cmp.Options{cmpOpts, cmpopts.EquateNaNs()}

func FuzzUnmarshal(f *testing.F) {
	seeds(f, ".bin", Marshal)
	c := charter(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, resealed(data)} {
			m, err := Unmarshal(c, in)
			if err != nil {
				continue
			}
			again, back := roundTrip(t, c, m, Marshal, Unmarshal)
			sameFuzz(t, m, back)
			if third, err := Marshal(back); err != nil || !bytes.Equal(third, again) {
				t.Fatalf("encoding is not stable: %v", err)
			}
		}
	})
}

func FuzzUnmarshalJSON(f *testing.F) {
	seeds(f, ".json", MarshalJSON)
	c := charter(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := UnmarshalJSON(c, data)
		if err != nil {
			return
		}
		_, back := roundTrip(t, c, m, MarshalJSON, UnmarshalJSON)
		sameFuzz(t, m, back)
		// The msgpack form holds it too.
		_, back = roundTrip(t, c, m, Marshal, Unmarshal)
		sameFuzz(t, m, back)
	})
}

func FuzzUnmarshalMessage(f *testing.F) {
	for _, msg := range kitchenSinkN(f, 60).History() {
		b, _ := MarshalMessage(msg)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, resealed(data)} {
			msg, err := UnmarshalMessage(in)
			if err != nil {
				continue
			}
			b, err := MarshalMessage(msg)
			if err != nil {
				t.Fatal(err)
			}
			back, err := UnmarshalMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(msg, back, fuzzOpts); d != "" {
				t.Fatalf("message changed:\n%s", d)
			}
		}
	})
}

// roundTrip encodes m with marshal and decodes the bytes with unmarshal,
// failing the test when either fails.
func roundTrip(t *testing.T, c *machine.Charter, m *machine.Machine, marshal func(*machine.Machine) ([]byte, error),
	unmarshal func(*machine.Charter, []byte) (*machine.Machine, error)) ([]byte, *machine.Machine) {
	t.Helper()
	data, err := marshal(m)
	if err != nil {
		t.Fatalf("decoded machine does not encode: %v", err)
	}
	back, err := unmarshal(c, data)
	if err != nil {
		t.Fatalf("re-encoded machine does not decode: %v\n%q", err, data)
	}
	return data, back
}

func sameFuzz(t *testing.T, want, got *machine.Machine) {
	t.Helper()
	if d := cmp.Diff(want.Root(), got.Root(), fuzzOpts); d != "" {
		t.Fatalf("tree changed in a round trip:\n%s", d)
	}
	if d := cmp.Diff(want.History(), got.History(), fuzzOpts); d != "" {
		t.Fatalf("history changed in a round trip:\n%s", d)
	}
}
