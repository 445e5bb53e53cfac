package schematype

import (
	"encoding/json"
	"testing"
)

func TestOf(t *testing.T) {
	for raw, want := range map[string]string{
		`"boolean"`:            "boolean",
		`["string","null"]`:    "string",
		`["null","integer"]`:   "integer",
		`["string","integer"]`: "",
		`["null"]`:             "",
		`42`:                   "",
		``:                     "",
	} {
		if got := Of(json.RawMessage(raw)); got != want {
			t.Errorf("Of(%s) = %q, want %q", raw, got, want)
		}
	}
}
