package frame

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// explain finds where v, a decoded JSON value, breaks schema s, for a
// person: the path of the field at fault ("approved", "items[2].amount";
// empty for the value as a whole) and a short reason ("expected boolean,
// got string"). It knows the keywords that schemas inferred from Go types
// use — type, required, properties, additionalProperties, items, enum —
// and reports ok false for any other violation, which the validator's
// own text then describes.
func explain(s *jsonschema.Schema, v any, path string) (field, reason string, ok bool) {
	if s == nil {
		return "", "", false
	}
	if types := schemaTypes(s); len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
		return path, fmt.Sprintf("expected %s, got %s", strings.Join(types, " or "), jsonType(v)), true
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		return path, "must be one of " + enumText(s.Enum), true
	}
	switch v := v.(type) {
	case map[string]any:
		// As the validator goes: the fields given, then those missing.
		names := slices.Sorted(maps.Keys(v))
		for _, name := range names {
			sub, declared := s.Properties[name]
			if !declared {
				sub = s.AdditionalProperties
			}
			if f, r, ok := explain(sub, v[name], join(path, name)); ok {
				return f, r, true
			}
		}
		for _, name := range names {
			if _, declared := s.Properties[name]; !declared && isFalse(s.AdditionalProperties) {
				return join(path, name), "unknown field", true
			}
		}
		for _, name := range s.Required {
			if _, has := v[name]; !has {
				return join(path, name), "required", true
			}
		}
	case []any:
		for i, item := range v {
			if f, r, ok := explain(s.Items, item, path+"["+strconv.Itoa(i)+"]"); ok {
				return f, r, true
			}
		}
	}
	return "", "", false
}

// schemaTypes are the types s allows (none: any).
func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

// isFalse reports the schema that accepts nothing, as inference writes it
// for additionalProperties: {"not": {}}.
func isFalse(s *jsonschema.Schema) bool {
	return s != nil && s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// hasType reports whether v is of JSON Schema type t.
func hasType(v any, t string) bool {
	got := jsonType(v)
	switch {
	case got == t:
		return true
	case t == "number":
		return got == "integer"
	}
	return false
}

// jsonType is the JSON Schema type of v: an integer is a number with no
// fractional part.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// enumText lists the allowed values, JSON-like and short.
func enumText(values []any) string {
	parts := make([]string, len(values))
	for i, e := range values {
		if s, ok := e.(string); ok {
			parts[i] = strconv.Quote(s)
		} else {
			parts[i] = fmt.Sprint(e)
		}
	}
	return strings.Join(parts, ", ")
}

// join appends field name to path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
