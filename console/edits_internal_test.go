package console

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []change
	}{
		{"same", `{"a":1,"b":"x"}`, `{ "b": "x", "a": 1 }`, nil},
		{"changed, added, removed", `{"a":1,"b":"x","c":true}`, `{"d":[1, 2],"a":2,"b":"x"}`,
			[]change{{"d", "", "[1,2]"}, {"a", "1", "2"}, {"c", "true", ""}}},
		{"not objects", `5`, `6`, []change{{"input", "5", "6"}}},
		{"one not an object", `{"a":1}`, `[1]`, []change{{"input", `{"a":1}`, "[1]"}}},
		{"none before", ``, `{"a":1}`, []change{{"input", "", `{"a":1}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, changes(json.RawMessage(tc.before), json.RawMessage(tc.after)))
		})
	}
}

func FuzzChanges(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`{"a":2}`))
	f.Add([]byte(`{"a":1,"a":2}`), []byte(`null`))
	f.Add([]byte(`[`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, before, after []byte) {
		got := changes(before, after)
		seen := map[string]bool{}
		for _, c := range got {
			require.False(t, seen[c.Field], "field %q listed twice", c.Field)
			seen[c.Field] = true
			require.NotEqual(t, c.From, c.To, "field %q unchanged", c.Field)
		}
	})
}
