package serialize

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// States decode strictly: a persisted state with a field its type lacks
// fails to load (ErrUnknownFields) instead of loading without that field's
// data. A node that changed its state type declares a state version and a
// migration (node.Config.StateVersion, Migrate); states saved at an older
// version go through the migration, as JSON.

// UnknownFieldsError is the error of a persisted state with fields its
// type lacks. It wraps ErrUnknownFields.
type UnknownFieldsError struct {
	// Fields are the unknown fields, sorted, each a dotted path from the
	// state's top level ("items", "order.note"); elements of lists and
	// maps add no segment.
	Fields []string
}

func (e *UnknownFieldsError) Error() string {
	q := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		q[i] = strconv.Quote(f)
	}
	return fmt.Sprintf("%v: %s (renamed or removed since the state was saved? give the node a StateVersion and Migrate)", ErrUnknownFields, strings.Join(q, ", "))
}

// Unwrap returns ErrUnknownFields.
func (e *UnknownFieldsError) Unwrap() error { return ErrUnknownFields }

// evolving is a node or a pack: a state type with a persisted version and
// a migration from older versions.
type evolving interface {
	Name() string
	StateType() reflect.Type
	StateVersion() int
	MigrateState(from int, raw json.RawMessage) (any, error)
}

// evolvedState decodes the state of node or pack n saved at state version
// v from its msgpack or JSON bytes: strictly as n's type when v is n's
// version, through n's migration when v is older.
func evolvedState(n evolving, v int, mp, js []byte) (any, error) {
	switch cur := n.StateVersion(); {
	case v < 0:
		return nil, fmt.Errorf("%w: negative state version %d", ErrCorrupt, v)
	case v > cur:
		return nil, fmt.Errorf("%w: saved at version %d, %s is at version %d", ErrStateVersion, v, n.Name(), cur)
	case v < cur:
		raw, err := stateJSON(mp, js)
		if err != nil {
			return nil, err
		}
		return n.MigrateState(v, raw)
	}
	return decodeStateValue(n.StateType(), mp, js)
}

// stateJSON returns a persisted state as JSON: JSON bytes as they are,
// msgpack bytes decoded without a type and encoded as JSON, "null" for no
// state.
func stateJSON(mp, js []byte) (json.RawMessage, error) {
	switch {
	case len(js) > 0:
		return js, nil
	case len(mp) == 0:
		return json.RawMessage("null"), nil
	}
	v, err := codecFor(anyType).decode(mp)
	if err != nil {
		return nil, err
	}
	b, err := encodeJSON(v)
	if err != nil {
		return nil, fmt.Errorf("state not representable as JSON for its migration: %w", err)
	}
	return b, nil
}

// strictError returns the error of a state of type t whose strict decoding
// failed with err: an *UnknownFieldsError when the persisted value
// (untyped: maps, lists, scalars) has fields t lacks, else err. mp: the
// value came from the msgpack form, whose field names match exactly;
// encoding/json matches them regardless of case.
func strictError(t reflect.Type, value any, mp bool, err error) error {
	found := map[string]bool{}
	unknownFields(t, value, mp, "", found, 0)
	if len(found) == 0 {
		return err
	}
	e := &UnknownFieldsError{Fields: make([]string, 0, len(found))}
	for f := range found {
		e.Fields = append(e.Fields, f)
	}
	slices.Sort(e.Fields)
	return e
}

// unknownFields adds to found the paths of the fields of value, below
// path, that type t lacks.
func unknownFields(t reflect.Type, value any, mp bool, path string, found map[string]bool, depth int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > maxStateDepth || implements(t, jsonUnmarshaler) || implements(t, textDecoder) ||
		(mp && (implements(t, binaryDecoder) || implements(t, msgpackDecoder) || implements(t, msgpackCustomDec))) {
		return // the type decodes itself
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, _ := value.(map[string]any)
		fields := fieldsOf(t, mp)
		for k, v := range obj {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if !mp {
				k = strings.ToLower(k)
			}
			if ft, ok := fields[k]; ok {
				unknownFields(ft, v, mp, p, found, depth+1)
			} else {
				found[p] = true
			}
		}
	case reflect.Map:
		obj, _ := value.(map[string]any)
		for _, v := range obj {
			unknownFields(t.Elem(), v, mp, path, found, depth+1)
		}
	case reflect.Slice, reflect.Array:
		list, _ := value.([]any)
		for _, v := range list {
			unknownFields(t.Elem(), v, mp, path, found, depth+1)
		}
	}
}

type fieldsKey struct {
	t  reflect.Type
	mp bool
}

var fieldSets sync.Map // fieldsKey → map[string]reflect.Type

// fieldsOf returns the fields of struct type t by the names its values
// are keyed by: the msgpack tag, else the json tag, else the Go name in the
// msgpack form; the json tag, else the Go name, lower-cased, in the JSON
// form. The fields of embedded structs without a name are promoted.
func fieldsOf(t reflect.Type, mp bool) map[string]reflect.Type {
	k := fieldsKey{t, mp}
	if m, ok := fieldSets.Load(k); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(m, t, mp, 0)
	fieldSets.Store(k, m)
	return m
}

func addFields(m map[string]reflect.Type, t reflect.Type, mp bool, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if v := f.Tag.Get("msgpack"); mp && v != "" {
			tag = v
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct && depth < maxStateDepth {
				addFields(m, et, mp, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if !mp {
			name = strings.ToLower(name)
		}
		if _, ok := m[name]; !ok {
			m[name] = f.Type
		}
	}
}
