package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
)

// An elicitation form is a flat object: its properties are strings,
// numbers, integers or booleans. A suspension's payload schema is shown
// as one when it is one; otherwise it is wrapped in a form of one field,
// and the payload is that field's value.
const (
	// ValueField holds the answer to a suspension whose payload schema
	// is a string, number, integer or boolean schema.
	ValueField = "value"
	// AnswerField holds the text answer to a suspension with no payload
	// schema.
	AnswerField = "answer"
	// JSONField holds the answer, as JSON text, to a suspension whose
	// payload schema a form cannot show (nested objects, arrays).
	JSONField = "json"
)

// errAnswer is the violation of an answer that does not fill its form.
var errAnswer = errors.New("answer")

// form is how a suspension's payload schema is asked for as an
// elicitation.
type form struct {
	// schema is the elicitation's requestedSchema.
	schema json.RawMessage
	// field is the one field the payload is taken from; empty when the
	// form is the payload schema itself.
	field string
}

// formFor is the form of payload schema ps.
func formFor(ps json.RawMessage) form {
	var s map[string]any
	if len(ps) == 0 || json.Unmarshal(ps, &s) != nil || len(s) == 0 {
		return form{field: AnswerField, schema: json.RawMessage(
			`{"type":"object","properties":{"answer":{"type":"string","description":"your answer"}},"required":["answer"]}`)}
	}
	if s["type"] == "object" && flat(s["properties"]) {
		return form{schema: ps}
	}
	if primitive(s["type"]) {
		return form{field: ValueField, schema: json.RawMessage(
			`{"type":"object","properties":{"value":` + string(ps) + `},"required":["value"]}`)}
	}
	desc, _ := json.Marshal("your answer as JSON matching the schema " + string(ps))
	return form{field: JSONField, schema: json.RawMessage(
		`{"type":"object","properties":{"json":{"type":"string","description":` + string(desc) + `}},"required":["json"]}`)}
}

// flat reports whether props, an object schema's properties, are all
// of primitive types.
func flat(props any) bool {
	m, ok := props.(map[string]any)
	if !ok {
		return false
	}
	for _, p := range m {
		ps, ok := p.(map[string]any)
		if !ok || !primitive(ps["type"]) {
			return false
		}
	}
	return true
}

// primitive reports whether a schema's type is one a form field can be.
func primitive(t any) bool {
	switch t {
	case "string", "number", "integer", "boolean":
		return true
	}
	return false
}

// payload is the resume payload of content, the form's accepted answer;
// the suspension's schema checks it next.
func (f form) payload(content map[string]any) (json.RawMessage, error) {
	if f.field == "" {
		if content == nil {
			content = map[string]any{}
		}
		return json.Marshal(content)
	}
	v, ok := content[f.field]
	if !ok {
		return nil, fmt.Errorf("%w: the field %s is missing", errAnswer, f.field)
	}
	if f.field != JSONField {
		return json.Marshal(v)
	}
	text, ok := v.(string)
	if !ok || !json.Valid([]byte(text)) {
		return nil, fmt.Errorf("%w: the field %s is not JSON text", errAnswer, f.field)
	}
	return json.RawMessage(text), nil
}
