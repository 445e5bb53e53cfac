package frame

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// explainCases are payloads of acceptIn the validator refuses, with what
// explain tells a person.
var explainCases = []struct{ in, field, reason string }{
	{`"text"`, "", "expected object, got string"},
	{`{"count":3}`, "text", "required"},
	{`{"text":1,"count":3,"small":1,"ratio":1,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"x"}}`, "text", "expected string, got integer"},
	{`{"text":"a","count":1.5,"small":1,"ratio":1,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"x"}}`, "count", "expected integer, got number"},
	{`{"text":"a","count":1,"small":1,"ratio":1,"ok":"yes","opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"x"}}`, "ok", "expected boolean, got string"},
	{`{"text":"a","count":1,"small":1,"ratio":1,"ok":true,"opt":null,"list":[1,"2"],"pair":["a","b"],"labels":{},"leaf":{"name":"x"}}`, "list[1]", "expected integer, got string"},
	{`{"text":"a","count":1,"small":1,"ratio":1,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{"k":true},"leaf":{"name":"x"}}`, "labels.k", "expected integer, got boolean"},
	{`{"text":"a","count":1,"small":1,"ratio":1,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"x","more":1}}`, "leaf.more", "unknown field"},
	{`{"text":"a","count":1,"small":1,"ratio":1,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"x"},"leaves":[{"name":"y"},{}]}`, "leaves[1].name", "required"},
	{`{"text":"a","count":1,"small":1,"ratio":1,"ok":true,"opt":7,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"x"}}`, "opt", "expected null or string, got integer"},
}

func TestExplain(t *testing.T) {
	s, err := SchemaFor[acceptIn]()
	require.NoError(t, err)
	for _, tc := range explainCases {
		verr := s.Validate(json.RawMessage(tc.in))
		require.Error(t, verr, tc.in)
		field, reason := s.explain(json.RawMessage(tc.in), verr)
		require.Equal(t, tc.field+": "+tc.reason, field+": "+reason, tc.in)
	}
	// What it cannot tell, the validator does.
	small := `{"text":"a","count":1,"small":256,"ratio":1,"ok":true,"opt":null,"list":[],"pair":["a","b"],"labels":{},"leaf":{"name":"x"}}`
	verr := s.Validate(json.RawMessage(small))
	require.Error(t, verr)
	field, reason := s.explain(json.RawMessage(small), verr)
	require.Equal(t, "", field)
	require.Equal(t, verr.Error(), reason)
}

// FuzzExplain checks that explain never blames a value the validator
// accepts, and never panics.
func FuzzExplain(f *testing.F) {
	for _, tc := range explainCases {
		f.Add(tc.in)
	}
	for _, in := range acceptCases {
		f.Add(in)
	}
	s, err := SchemaFor[acceptIn]()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			return
		}
		field, reason, ok := explain(s.resolved.Schema(), v, "")
		if verr := s.resolved.Validate(v); verr == nil && ok {
			t.Errorf("%s: valid, yet explain blames %q: %s", in, field, reason)
		}
	})
}
