package node

import (
	"encoding/json"
	"reflect"

	"github.com/markov-agents/markov/internal/frame"
)

// OutputSpec asks the model for structured output: when a node has one, the
// model's final text is parsed as JSON, validated against the schema and
// added to the reply as a structured output part.
type OutputSpec struct {
	// Name identifies the schema to providers.
	Name   string
	schema *frame.Schema
	typ    reflect.Type
	err    error
}

// Output returns the spec for structured output of type T (a struct or
// map). A T without an object schema is reported when the node is built.
func Output[T any](name string) *OutputSpec {
	s, err := frame.SchemaFor[T]()
	return &OutputSpec{Name: name, schema: s, typ: reflect.TypeFor[T](), err: err}
}

// Schema returns the output's JSON Schema.
func (o *OutputSpec) Schema() json.RawMessage { return o.schema.Raw }

// Parse validates text as the output type and returns its canonical JSON.
func (o *OutputSpec) Parse(text string) (json.RawMessage, error) {
	v := reflect.New(o.typ)
	if err := o.schema.DecodeInto([]byte(text), v.Interface()); err != nil {
		return nil, err
	}
	return json.Marshal(v.Elem().Interface())
}
