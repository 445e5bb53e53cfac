package webhook

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLookup(t *testing.T) {
	doc := []byte(`{"a":{"b":[10,{"c~/d":"x"}]},"n":42,"s":"t"}`)
	for ptr, want := range map[string]string{"": string(doc), "/n": "42", "/a/b/0": "10", "/a/b/1/c~0~1d": `"x"`} {
		got, err := lookup(doc, ptr)
		require.NoError(t, err, ptr)
		require.JSONEq(t, want, string(got), ptr)
	}
	for _, ptr := range []string{"/x", "/a/b/2", "/a/b/01", "/n/0", "a"} {
		_, err := lookup(doc, ptr)
		require.ErrorIs(t, err, ErrBadPointer, ptr)
	}
	s, err := lookupString(doc, "/n")
	require.NoError(t, err)
	require.Equal(t, "42", s)
	_, err = lookupString(doc, "/a")
	require.ErrorIs(t, err, ErrBadPointer)
}

// A pointer into any body finds valid JSON or refuses with ErrBadPointer.
func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,2]}}`), "/a/b/1")
	f.Add([]byte(`[{"~":1}]`), "/0/~0")
	f.Add([]byte(`not json`), "")
	f.Add([]byte(`{"a":`), "/a")
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		v, err := lookup(doc, ptr)
		if err != nil {
			if !errors.Is(err, ErrBadPointer) {
				t.Fatalf("error %v does not wrap ErrBadPointer", err)
			}
			return
		}
		if !json.Valid(v) {
			t.Fatalf("lookup(%q, %q) = %q, not JSON", doc, ptr, v)
		}
	})
}
