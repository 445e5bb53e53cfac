package mergepatch

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The examples of RFC 7396, appendix A.
func TestApplyRFC7396(t *testing.T) {
	tests := []struct{ doc, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, tt := range tests {
		got, err := Apply([]byte(tt.doc), []byte(tt.patch))
		if err != nil {
			t.Fatalf("Apply(%s, %s): %v", tt.doc, tt.patch, err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("Apply(%s, %s) mismatch (-want +got):\n%s", tt.doc, tt.patch, d)
		}
	}
}

func TestApplyBadJSON(t *testing.T) {
	if _, err := Apply([]byte(`{}`), []byte(`{`)); err == nil {
		t.Error("bad patch: want error")
	}
	if _, err := Apply([]byte(`{`), []byte(`{}`)); err == nil {
		t.Error("bad document: want error")
	}
}

// FuzzApply checks that no input panics and that applying a patch twice
// gives the same document (merge patches are idempotent).
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"a":"b"}`), []byte(`{"a":null,"c":{"d":1}}`))
	f.Add([]byte(`[1,2]`), []byte(`{"x":[1]}`))
	f.Add([]byte(`{}`), []byte(`"s"`))
	f.Fuzz(func(t *testing.T, doc, patch []byte) {
		once, err := Apply(doc, patch)
		if err != nil {
			return
		}
		twice, err := Apply(once, patch)
		if err != nil {
			t.Fatalf("second apply failed: %v", err)
		}
		var a, b any
		if json.Unmarshal(once, &a) != nil || json.Unmarshal(twice, &b) != nil {
			t.Fatal("Apply produced invalid JSON")
		}
		if d := cmp.Diff(a, b); d != "" {
			t.Fatalf("not idempotent:\n%s", d)
		}
	})
}
