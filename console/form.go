package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/markov-agents/markov/internal/errtext"
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
	Format      string             `json:"format"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Enum        []json.RawMessage  `json:"enum"`
	// order is the properties' names as the schema lists them (the Go
	// struct's field order, for an inferred schema): a map forgets it.
	order []string
}

// UnmarshalJSON decodes a schema and keeps its properties' order.
func (s *schema) UnmarshalJSON(b []byte) error {
	type plain schema
	var p struct {
		plain
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = schema(p.plain)
	if len(p.Properties) == 0 || string(p.Properties) == "null" {
		return nil
	}
	if err := json.Unmarshal(p.Properties, &s.Properties); err != nil {
		return err
	}
	s.order = objectKeys(p.Properties)
	return nil
}

// objectKeys lists the keys of the JSON object raw in the order written,
// each once (nil if raw is not an object).
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return nil
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// typeName is the schema's one type other than null, or "".
func (s *schema) typeName() string { return schematype.Of(s.Type) }

// Field is one input of a payload form.
type Field struct {
	Name, Label, Description string
	Kind                     string
	// Format is the schema's format of a string ("date", "date-time"),
	// which picks the input a browser offers.
	Format   string
	Required bool
	Options  []string
	Value    string
	// Error is what is wrong with Value, shown at the field.
	Error string
}

// ID is the field's HTML id.
func (f Field) ID() string { return "field-" + f.Name }

// DescribedBy lists the ids of what describes the field (its hint, its
// error), for aria-describedby; "" when nothing does.
func (f Field) DescribedBy() string {
	var ids []string
	if f.Description != "" || f.Kind == kindJSON {
		ids = append(ids, f.ID()+"-desc")
	}
	if f.Error != "" {
		ids = append(ids, f.ID()+"-err")
	}
	return strings.Join(ids, " ")
}

// FieldError is a form value that does not fit its field: Field names
// it, Message says what is wrong, short, for the person who typed it. It
// wraps ErrFormValue.
type FieldError struct {
	Field, Message string
}

// Error names the field and the problem.
func (e *FieldError) Error() string { return ErrFormValue.Error() + ": " + e.Field + ": " + e.Message }

// Unwrap returns ErrFormValue.
func (e *FieldError) Unwrap() error { return ErrFormValue }

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
	form := Form{Object: true}
	bools := 0
	for _, n := range s.order {
		p := s.Properties[n]
		if p == nil {
			p = &schema{}
		}
		f := field(n, p)
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
	f := Field{Name: name, Label: name, Description: s.Description, Kind: kindJSON, Format: s.Format}
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
	return f.payload(v, false)
}

// payload decodes the fields' values: the one value, or an object of the
// fields (empty optional fields left out). For a Reject none is
// required: a required field left blank gets its type's zero value, or
// is left out when it has none.
func (f Form) payload(v url.Values, reject bool) (any, error) {
	if !f.Object {
		return f.Fields[0].decode(v)
	}
	out := make(map[string]any, len(f.Fields))
	for _, fl := range f.Fields {
		if reject && fl.Required && fl.Kind != kindBoolean && strings.TrimSpace(v.Get(fl.Name)) == "" {
			if z, ok := zeroOf[fl.Kind]; ok {
				out[fl.Name] = z
			}
			continue
		}
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
		return nil, f.fail("required")
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
			return nil, f.fail(fmt.Sprintf("must be a whole number, not %q", errtext.Clip(s, 32)))
		}
		return n, nil
	case kindNumber:
		n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, f.fail(fmt.Sprintf("must be a number, not %q", errtext.Clip(s, 32)))
		}
		return n, nil
	case kindEnum:
		if !slices.Contains(f.Options, s) {
			return nil, f.fail(fmt.Sprintf("must be one of the options, not %q", errtext.Clip(s, 32)))
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
		return nil, f.fail("is not JSON: " + err.Error())
	}
	return json.RawMessage(s), nil
}

// fail is a *FieldError of f.
func (f Field) fail(msg string) error { return &FieldError{Field: f.Name, Message: msg} }

// decodeReject turns a Reject into the payload: the yes-no field false
// and the fields filled in as decode takes them, except that none is
// required — a person declining need not fill in what an approval asks
// for. A required field left blank gets its type's zero value (false,
// 0, ""), or is left out when it has none (an option, JSON), for the
// schema to judge. It fails with ErrFormValue for a form without a
// yes-no field.
func (f Form) decodeReject(v url.Values) (any, error) {
	if f.YesNo == "" {
		return nil, &FieldError{Field: valueField, Message: "this suspension has no yes-or-no answer to reject"}
	}
	v = cloneValues(v)
	v.Set(f.YesNo, "false")
	return f.payload(v, true)
}

// zeroOf are the zero values a Reject gives required fields left blank.
var zeroOf = map[string]any{kindString: "", kindInteger: 0, kindNumber: 0.0}

// withError returns the form with msg shown at the field the path of a
// payload error points into ("tags[1]" is the field tags), and whether
// the form has that field.
func (f Form) withError(path, msg string) (Form, bool) {
	name := fieldOf(path)
	out := f
	out.Fields = slices.Clone(f.Fields)
	for i := range out.Fields {
		if out.Fields[i].Name == name {
			out.Fields[i].Error = msg
			return out, true
		}
	}
	return f, false
}

// fieldOf is the name of the field a payload error's path points into
// ("tags[1]" is in tags; "" is the value of a form of one value).
func fieldOf(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		path = path[:i]
	}
	return cmp.Or(path, valueField)
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
