package serialize

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// States decode strictly: a persisted state with a field its type lacks
// fails to load (ErrUnknownFields) instead of loading without that field's
// data. A node that changed its state type declares a state version and a
// migration (node.Config.StateVersion, Migrate); states saved at an older
// version go through the migration, as JSON.

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
	if depth > maxStateDepth || decodesItself(t, mp) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, _ := value.(map[string]any)
		fields := fieldsOf(t, mp)
		for k, v := range obj {
			unknownField(fields, k, v, mp, path, found, depth)
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

// unknownField adds to found the path of the field k of a struct value,
// below path, when fields lacks it, and the unknown fields inside it.
func unknownField(fields map[string]reflect.Type, k string, v any, mp bool, path string, found map[string]bool, depth int) {
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

// decodesItself reports whether values of t decode through their own
// methods in the form (msgpack when mp, else JSON).
func decodesItself(t reflect.Type, mp bool) bool {
	return implements(t, jsonUnmarshaler) || implements(t, textDecoder) ||
		(mp && (implements(t, binaryDecoder) || implements(t, msgpackDecoder) || implements(t, msgpackCustomDec)))
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
		addField(m, t.Field(i), mp, depth)
	}
}

// addField adds struct field f to m, or the fields of an embedded struct.
func addField(m map[string]reflect.Type, f reflect.StructField, mp bool, depth int) {
	name := tagName(f, mp)
	if name == "-" || (!f.IsExported() && !f.Anonymous) {
		return
	}
	if f.Anonymous && name == "" {
		et := f.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if et.Kind() == reflect.Struct && depth < maxStateDepth {
			addFields(m, et, mp, depth+1)
			return
		}
		if !f.IsExported() {
			return
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

// tagName returns the name the tag of f gives it in the form: the
// msgpack tag's, else the json tag's, in the msgpack form; the json tag's
// in the JSON form.
func tagName(f reflect.StructField, mp bool) string {
	tag := f.Tag.Get("json")
	if v := f.Tag.Get("msgpack"); mp && v != "" {
		tag = v
	}
	name, _, _ := strings.Cut(tag, ",")
	return name
}

// knownKeys reports whether every object key of raw, valid JSON, names a
// field of t where t has fields, at any depth, as encoding/json matches
// them (case-insensitively). A false answer may be wrong in corner cases
// (non-ASCII case folding, ambiguous embedded fields): the caller confirms
// it with a strict decoder.
func knownKeys(t reflect.Type, raw []byte) bool {
	s := keyScanner{b: raw}
	return s.value(keyTreeFor(t), 0)
}

// keyTree is what knownKeys checks values of one type against; nil takes
// any value (an interface, a type that decodes itself, a scalar).
type keyTree struct {
	fields map[string]*keyTree // a struct: its fields, by fieldsOf's JSON-form keys
	elem   *keyTree            // a map, slice or array: its elements
	strct  bool
}

var keyTrees sync.Map // reflect.Type → *keyTree

func keyTreeFor(t reflect.Type) *keyTree {
	if k, ok := keyTrees.Load(t); ok {
		return k.(*keyTree)
	}
	k := buildKeyTree(t, map[reflect.Type]*keyTree{})
	keyTrees.Store(t, k)
	return k
}

func buildKeyTree(t reflect.Type, memo map[reflect.Type]*keyTree) *keyTree {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if k, ok := memo[t]; ok {
		return k
	}
	if decodesItself(t, false) {
		return nil
	}
	k := &keyTree{}
	memo[t] = k
	switch t.Kind() {
	case reflect.Struct:
		k.strct = true
		fields := fieldsOf(t, false)
		k.fields = make(map[string]*keyTree, len(fields))
		for name, ft := range fields {
			k.fields[name] = buildKeyTree(ft, memo)
		}
	case reflect.Map, reflect.Slice, reflect.Array:
		k.elem = buildKeyTree(t.Elem(), memo)
	default:
		return nil
	}
	return k
}

// keyScanner walks valid JSON beside a keyTree.
type keyScanner struct {
	b []byte
	i int
}

func (s *keyScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// value checks the value at the cursor against k and moves past it.
func (s *keyScanner) value(k *keyTree, depth int) bool {
	if depth > maxStateDepth {
		return false
	}
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	var elem *keyTree
	if k != nil {
		elem = k.elem
	}
	switch s.b[s.i] {
	case '{':
		return s.list('}', func() bool {
			key, ok := s.key()
			if !ok {
				return false
			}
			vk := elem
			if k != nil && k.strct {
				if vk, ok = field(k.fields, key); !ok {
					return false
				}
			}
			return s.value(vk, depth+1)
		})
	case '[':
		return s.list(']', func() bool { return s.value(elem, depth+1) })
	case '"':
		_, ok := s.str()
		return ok
	}
	for ; s.i < len(s.b); s.i++ { // a number, true, false or null
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return true
		}
	}
	return true
}

// list reads the elements of an object or array, the cursor on its
// opening bracket, with elem, up to end.
func (s *keyScanner) list(end byte, elem func() bool) bool {
	s.i++
	for {
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case end:
			s.i++
			return true
		case ',':
			s.i++
		}
		if !elem() {
			return false
		}
	}
}

// key reads an object key, raw, and its colon.
func (s *keyScanner) key() ([]byte, bool) {
	s.space()
	k, ok := s.str()
	if !ok {
		return nil, false
	}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return nil, false
	}
	s.i++
	return k, true
}

// field looks the raw JSON key k up in fields of the JSON form (keys
// lower-cased), without allocating for a key in lower case.
func field(fields map[string]*keyTree, k []byte) (*keyTree, bool) {
	for _, c := range k {
		if c >= 'A' && c <= 'Z' || c >= 0x80 {
			t, ok := fields[strings.ToLower(string(k))]
			return t, ok
		}
	}
	t, ok := fields[string(k)]
	return t, ok
}

// str reads a string at the cursor and returns its raw contents.
func (s *keyScanner) str() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	for s.i = start; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return s.b[start : s.i-1], true
		}
	}
	return nil, false
}
