// Package schematype reads the "type" keyword of a JSON Schema, for the
// packages that build on a suspension's payload schema (console's forms,
// acp's permission requests).
package schematype

import (
	"encoding/json"
	"slices"
)

// Of returns the one type other than "null" that the value of a schema's
// "type" keyword names ("string", or ["string", "null"]), or "" when it
// names none or several.
func Of(typ json.RawMessage) string {
	var one string
	if json.Unmarshal(typ, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(typ, &many) != nil {
		return ""
	}
	many = slices.DeleteFunc(many, func(t string) bool { return t == "null" })
	if len(many) == 1 {
		return many[0]
	}
	return ""
}
