package frame

import (
	"math"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// acceptor checks decoded JSON against the keywords inferred input schemas
// use (types, properties, required, additional properties, items, numeric
// and length bounds) without allocating. It only accepts: a value it does
// not accept goes to the full validator, which decides and explains, so
// results and error messages are the full validator's.
type acceptor struct {
	never              bool     // the schema {"not": {}}: nothing validates
	types              []string // empty: any type
	minimum, maximum   *float64
	minItems, maxItems *int
	items              *acceptor
	properties         map[string]*acceptor
	required           []string
	additional         *acceptor // nil: any additional property
}

// newAcceptor compiles s, or returns nil when s uses a keyword the
// acceptor does not know (the full validator then decides every value).
func newAcceptor(s *jsonschema.Schema) *acceptor {
	if s == nil {
		return &acceptor{}
	}
	rest := *s
	// Annotations never change validation.
	rest.Title, rest.Description, rest.Comment, rest.Default = "", "", "", nil
	rest.Deprecated, rest.ReadOnly, rest.WriteOnly, rest.Examples, rest.PropertyOrder = false, false, false, nil, nil
	if s.Not != nil {
		rest.Not = nil
		if reflect.ValueOf(rest).IsZero() && reflect.ValueOf(*s.Not).IsZero() {
			return &acceptor{never: true}
		}
		return nil
	}
	a := &acceptor{
		types:    s.Types,
		minimum:  s.Minimum,
		maximum:  s.Maximum,
		minItems: s.MinItems,
		maxItems: s.MaxItems,
		required: s.Required,
	}
	if s.Type != "" {
		a.types = []string{s.Type}
	}
	rest.Type, rest.Types, rest.Minimum, rest.Maximum, rest.MinItems, rest.MaxItems, rest.Required = "", nil, nil, nil, nil, nil, nil
	rest.Items, rest.Properties, rest.AdditionalProperties = nil, nil, nil
	if !reflect.ValueOf(rest).IsZero() {
		return nil
	}
	if s.Items != nil {
		if a.items = newAcceptor(s.Items); a.items == nil {
			return nil
		}
	}
	if s.AdditionalProperties != nil {
		if a.additional = newAcceptor(s.AdditionalProperties); a.additional == nil {
			return nil
		}
	}
	if len(s.Properties) > 0 {
		a.properties = make(map[string]*acceptor, len(s.Properties))
		for name, p := range s.Properties {
			if a.properties[name] = newAcceptor(p); a.properties[name] == nil {
				return nil
			}
		}
	}
	return a
}

// accepts reports whether v, a value json.Unmarshal decoded into an any,
// certainly validates.
func (a *acceptor) accepts(v any) bool {
	if a.never || !a.acceptsType(v) {
		return false
	}
	switch v := v.(type) {
	case float64:
		return (a.minimum == nil || v >= *a.minimum) && (a.maximum == nil || v <= *a.maximum)
	case []any:
		return a.acceptsArray(v)
	case map[string]any:
		return a.acceptsObject(v)
	}
	return true
}

// acceptsArray applies the item count bounds and the items schema.
func (a *acceptor) acceptsArray(v []any) bool {
	if (a.minItems != nil && len(v) < *a.minItems) || (a.maxItems != nil && len(v) > *a.maxItems) {
		return false
	}
	if a.items == nil {
		return true
	}
	for _, item := range v {
		if !a.items.accepts(item) {
			return false
		}
	}
	return true
}

// acceptsObject applies required, properties and additional properties.
func (a *acceptor) acceptsObject(v map[string]any) bool {
	for _, name := range a.required {
		if _, ok := v[name]; !ok {
			return false
		}
	}
	for name, val := range v {
		p, ok := a.properties[name]
		switch {
		case ok && !p.accepts(val):
			return false
		case !ok && a.additional != nil && !a.additional.accepts(val):
			return false
		}
	}
	return true
}

// acceptsType applies the type keyword as the full validator does: an
// integral number is an "integer", and "number" takes integers too.
func (a *acceptor) acceptsType(v any) bool {
	if len(a.types) == 0 {
		return true
	}
	var got string
	switch v := v.(type) {
	case nil:
		got = "null"
	case bool:
		got = "boolean"
	case float64:
		got = "number"
		if _, f := math.Modf(v); f == 0 {
			got = "integer"
		}
	case string:
		got = "string"
	case []any:
		got = "array"
	case map[string]any:
		got = "object"
	default:
		return false
	}
	return slices.Contains(a.types, got) || (got == "integer" && slices.Contains(a.types, "number"))
}
