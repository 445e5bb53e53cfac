package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/markov-agents/markov/internal/schematype"
)

// Field kinds a form offers.
const (
	kindString  = "string"
	kindInteger = "integer"
	kindNumber  = "number"
	kindBoolean = "boolean"
	kindEnum    = "enum"
	kindJSON    = "json"
	// kindText is the field of an empty schema: JSON if it parses,
	// otherwise the text itself.
	kindText = "text"
)

// valueField is the field name of a payload that is not an object.
const valueField = "value"

// yesNoField is the button that answers a yes-no schema.
const yesNoField = "_decision"

// schema is the part of JSON Schema a form is made of.
type schema struct {
	Type        json.RawMessage    `json:"type"`
	Title       string             `json:"title"`
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Enum        []json.RawMessage  `json:"enum"`
}

// typeName is the schema's one type other than null, or "".
func (s *schema) typeName() string { return schematype.Of(s.Type) }

// Field is one input of a payload form.
type Field struct {
	Name, Label, Description string
	Kind                     string
	Required                 bool
	Options                  []string
	Value                    string
}

// Form is the payload form of one suspension. Object is false when the
// payload is one value (Fields has one field named "value").
type Form struct {
	Object bool
	Fields []Field
	// YesNo names the boolean field approve / reject set, or "".
	YesNo string
}

// newForm makes the form of a payload schema: one field per property of
// an object of simple types (string, integer, number, boolean, enum), one
// value field for a simple schema, and a JSON text field for anything
// else (and for an empty schema, where any payload goes).
func newForm(raw json.RawMessage) Form {
	var s schema
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return Form{Fields: []Field{{Name: valueField, Label: "result", Kind: kindText}}}
	}
	if s.typeName() != "object" || len(s.Properties) == 0 {
		f := field(valueField, &s)
		f.Label, f.Required = "result", true
		return Form{Fields: []Field{f}, YesNo: yesNo(f)}
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	form := Form{Object: true}
	bools := 0
	for _, n := range names {
		f := field(n, s.Properties[n])
		f.Required = slices.Contains(s.Required, n)
		if f.Kind == kindBoolean {
			bools++
			form.YesNo = n
		}
		form.Fields = append(form.Fields, f)
	}
	if bools != 1 {
		form.YesNo = ""
	}
	return form
}

func yesNo(f Field) string {
	if f.Kind == kindBoolean {
		return f.Name
	}
	return ""
}

func field(name string, s *schema) Field {
	f := Field{Name: name, Label: name, Description: s.Description, Kind: kindJSON}
	if s.Title != "" {
		f.Label = s.Title
	}
	if len(s.Enum) > 0 {
		f.Kind = kindEnum
		for _, e := range s.Enum {
			f.Options = append(f.Options, string(e))
		}
		return f
	}
	switch t := s.typeName(); t {
	case kindString, kindInteger, kindNumber, kindBoolean:
		f.Kind = t
	}
	return f
}

// decode turns posted values into the payload: an object of the fields
// (empty optional fields left out), or the one value. A yes-no button
// sets its boolean. A value that does not fit its field wraps
// ErrFormValue.
func (f Form) decode(v url.Values) (any, error) {
	if d := v.Get(yesNoField); d != "" && f.YesNo != "" {
		v = cloneValues(v)
		v.Set(f.YesNo, d)
	}
	if !f.Object {
		return f.Fields[0].decode(v)
	}
	out := make(map[string]any, len(f.Fields))
	for _, fl := range f.Fields {
		x, err := fl.decode(v)
		if err != nil {
			return nil, err
		}
		if x != nil {
			out[fl.Name] = x
		}
	}
	return out, nil
}

func cloneValues(v url.Values) url.Values {
	c := make(url.Values, len(v))
	for k, vs := range v {
		c[k] = slices.Clone(vs)
	}
	return c
}

// decode returns the field's value, nil for an optional field left empty.
// A required field left blank is refused, text included: the console's
// rule, so that an approval never goes out "approved by ." (a schema
// cannot require a non-blank string without minLength, which few declare).
func (f Field) decode(v url.Values) (any, error) {
	s := v.Get(f.Name)
	switch {
	case f.Kind == kindBoolean:
		return s == "on" || s == "true", nil
	case f.Kind == kindString && strings.TrimSpace(s) != "":
		return s, nil
	case strings.TrimSpace(s) == "" && f.Required:
		return nil, fmt.Errorf("%w: %s is required", ErrFormValue, f.Label)
	case strings.TrimSpace(s) == "":
		return nil, nil
	}
	return f.parse(s)
}

// parse decodes a non-empty value of a field that is not a boolean.
func (f Field) parse(s string) (any, error) {
	switch f.Kind {
	case kindInteger:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %s must be a whole number, not %q", ErrFormValue, f.Label, s)
		}
		return n, nil
	case kindNumber:
		n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %s must be a number, not %q", ErrFormValue, f.Label, s)
		}
		return n, nil
	case kindEnum:
		if !slices.Contains(f.Options, s) {
			return nil, fmt.Errorf("%w: %s must be one of the options, not %q", ErrFormValue, f.Label, s)
		}
		return json.RawMessage(s), nil
	case kindText:
		if json.Valid([]byte(s)) {
			return json.RawMessage(s), nil
		}
		return s, nil
	}
	var x any
	if err := json.Unmarshal([]byte(s), &x); err != nil {
		return nil, fmt.Errorf("%w: %s is not JSON: %v", ErrFormValue, f.Label, err)
	}
	return json.RawMessage(s), nil
}

// withValues returns the form with the posted values filled in, to show
// it again after a violation.
func (f Form) withValues(v url.Values) Form {
	out := f
	out.Fields = slices.Clone(f.Fields)
	for i := range out.Fields {
		out.Fields[i].Value = v.Get(out.Fields[i].Name)
	}
	return out
}
