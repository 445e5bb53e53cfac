package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"reflect"
	"strconv"
	"strings"
)

// model is the wire model wire.go declares.
type model struct {
	structs []*wireStruct
}

// wireStruct is one wire struct.
type wireStruct struct {
	name  string // wireCall
	Name  string // Call
	human string // call
	model string // the in-memory type: instance.SuspendedCall
	alloc string // the decoder method slices of the model come from
	// self: the struct is its own model.
	self   bool
	fields []*field
	// How other structs hold it: in a list (of pointers), by value and
	// omitted when zero; recursive: it holds itself.
	listed, listPtr, zeroed, recursive bool
}

// converted reports whether the struct has conversions to and from its
// model (a struct that is its own model needs none).
func (s *wireStruct) converted() bool { return !s.self }

// hooked reports whether hand-written hooks fill and use some fields.
func (s *wireStruct) hooked() bool {
	for _, f := range s.fields {
		if f.hook {
			return true
		}
	}
	return false
}

// hookArgs returns the parameters and arguments of a struct's chunk
// functions: the model, and the wire struct of its hooks.
func (s *wireStruct) hookArgs() (params, args string) {
	params, args = "v *"+s.model, "v"
	if s.hooked() {
		params, args = params+", w *"+s.name, args+", w"
	}
	return params, args
}

// msgpackFields are the fields of the msgpack form.
func (s *wireStruct) msgpackFields() []*field {
	var out []*field
	for _, f := range s.fields {
		if !f.jsonOnly() {
			out = append(out, f)
		}
	}
	return out
}

// convertedFields are the fields the generated conversions handle.
func (s *wireStruct) convertedFields() []*field {
	var out []*field
	for _, f := range s.fields {
		if !f.hook && f.invalid == "" {
			out = append(out, f)
		}
	}
	return out
}

// invalidOf returns the field that holds name's bytes when they are not
// valid JSON, or nil.
func (s *wireStruct) invalidOf(name string) *field {
	for _, f := range s.fields {
		if f.invalid == name {
			return f
		}
	}
	return nil
}

type kind int

const (
	kindString kind = iota + 1
	kindIntern
	kindBool
	kindInt
	kindUint8
	kindBytes // json.RawMessage or []byte: msgpack bin
	kindRaw   // msgpack.RawMessage: a msgpack value as it is
	kindTime
	kindStruct // a wire struct by value
	kindPtr    // a pointer to a wire struct
	kindList   // a slice of wire structs or of pointers to them
	kindMap    // a map from strings to scalars
)

// field is one field of a wire struct.
type field struct {
	s         *wireStruct
	name      string
	key       string // the msgpack key; "" for a JSON-only field
	omitempty bool
	kind      kind
	elem      *wireStruct // kindStruct, kindPtr, kindList
	ptrElem   bool        // kindList of pointers
	elemName  string      // the name of elem, resolved after parsing
	mapElem   kind        // kindMap
	mapType   string      // kindMap: the value type
	hook      bool
	byvalue   bool
	invalid   string // the field whose invalid JSON this one holds
}

func (f *field) jsonOnly() bool { return f.key == "" }

// expr is the Go expression of the field's value in generated code.
func (f *field) expr() string {
	if f.hook {
		return "w." + f.name
	}
	return "v." + f.name
}

// nonEmpty is the Go condition that the field's value is not empty.
func (f *field) nonEmpty() string {
	x := f.expr()
	switch f.kind {
	case kindString, kindIntern:
		return x + ` != ""`
	case kindBool:
		return x
	case kindInt, kindUint8:
		return x + " != 0"
	case kindTime:
		return "!" + x + ".IsZero()"
	case kindStruct:
		return fmt.Sprintf("!zero%s(&%s)", f.elem.Name, x)
	case kindPtr:
		if f.byvalue {
			return fmt.Sprintf("!zero%s(&%s)", f.elem.Name, x)
		}
		return x + " != nil"
	}
	return "len(" + x + ") > 0"
}

// present is the Go condition that the field is written.
func (f *field) present() string {
	if !f.omitempty {
		return "true"
	}
	return f.nonEmpty()
}

// cast converts x to the type the encoder's scalar writer takes.
func (f *field) cast(x string) string {
	switch f.kind {
	case kindString, kindIntern:
		return "string(" + x + ")"
	case kindInt:
		return "int(" + x + ")"
	case kindUint8:
		return "uint8(" + x + ")"
	}
	return x
}

// addr is the operator that takes the address of a struct field's value.
func (f *field) addr() string {
	if f.kind == kindStruct || f.byvalue {
		return "&"
	}
	return ""
}

// parseModel reads the wire structs of wire.go.
func parseModel(f *ast.File) (*model, error) {
	m := &model{}
	byName := map[string]*wireStruct{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok || !strings.HasPrefix(ts.Name.Name, "wire") {
				continue
			}
			doc := gd.Doc
			if ts.Doc != nil {
				doc = ts.Doc
			}
			s, err := parseStruct(ts.Name.Name, doc, st)
			if err != nil {
				return nil, err
			}
			m.structs = append(m.structs, s)
			byName[s.name] = s
		}
	}
	return m, m.link(byName)
}

func parseStruct(name string, doc *ast.CommentGroup, st *ast.StructType) (*wireStruct, error) {
	base := strings.TrimPrefix(name, "wire")
	s := &wireStruct{name: name, Name: base, human: strings.ToLower(base), model: name, self: true}
	if doc != nil {
		for _, c := range doc.List {
			d, ok := strings.CutPrefix(c.Text, "//wire:")
			if !ok {
				continue
			}
			verb, arg, _ := strings.Cut(d, " ")
			switch verb {
			case "model":
				s.model, s.self = arg, false
			case "alloc":
				s.alloc = arg
			default:
				return nil, fmt.Errorf("wiregen: %s: unknown directive //wire:%s", name, verb)
			}
		}
	}
	for _, fl := range st.Fields.List {
		for _, n := range fl.Names {
			f, err := parseField(s, n.Name, fl)
			if err != nil {
				return nil, fmt.Errorf("wiregen: %s.%s: %w", name, n.Name, err)
			}
			s.fields = append(s.fields, f)
		}
	}
	return s, nil
}

func parseField(s *wireStruct, name string, fl *ast.Field) (*field, error) {
	f := &field{s: s, name: name}
	if fl.Tag == nil {
		return nil, fmt.Errorf("no tags")
	}
	raw, _ := strconv.Unquote(fl.Tag.Value)
	tag := reflect.StructTag(raw)
	key, opts, _ := strings.Cut(tag.Get("msgpack"), ",")
	if key == "" {
		return nil, fmt.Errorf("no msgpack key")
	}
	if key != "-" {
		f.key = key
	}
	for o := range strings.SplitSeq(opts, ",") {
		f.omitempty = f.omitempty || o == "omitempty"
		if o == "intern" {
			f.kind = kindIntern
		}
	}
	for o := range strings.SplitSeq(tag.Get("wire"), ",") {
		switch {
		case o == "hook":
			f.hook = true
		case o == "byvalue":
			f.byvalue = true
		case strings.HasPrefix(o, "invalid="):
			f.invalid = strings.TrimPrefix(o, "invalid=")
		case o != "":
			return nil, fmt.Errorf("unknown wire tag option %q", o)
		}
	}
	if f.jsonOnly() && f.invalid == "" {
		return nil, fmt.Errorf(`a field without a msgpack key needs wire:"invalid=…"`)
	}
	return f, f.parseType(fl.Type)
}

// scalarTypes are the kinds of the scalar types of wire fields.
var scalarTypes = map[string]kind{
	"string": kindString, "bool": kindBool, "int": kindInt, "uint8": kindUint8, "[]byte": kindBytes,
	"json.RawMessage": kindBytes, "msgpack.RawMessage": kindRaw, "time.Time": kindTime,
}

// parseType sets the field's kind from its type.
func (f *field) parseType(t ast.Expr) error {
	typ := exprString(t)
	if k, ok := scalarTypes[typ]; ok {
		if f.kind != kindIntern || k != kindString {
			f.kind = k
		}
		return nil
	}
	switch t := t.(type) {
	case *ast.Ident:
		f.kind, f.elemName = kindStruct, t.Name
	case *ast.StarExpr:
		f.kind, f.elemName = kindPtr, exprString(t.X)
	case *ast.ArrayType:
		star, ok := t.Elt.(*ast.StarExpr)
		f.kind, f.elemName, f.ptrElem = kindList, strings.TrimPrefix(exprString(t.Elt), "*"), ok && star != nil
	case *ast.MapType:
		v := &field{s: f.s, key: "-"}
		if exprString(t.Key) != "string" || v.parseType(t.Value) != nil || v.elemName != "" {
			return fmt.Errorf("unsupported map type %s", typ)
		}
		f.kind, f.mapElem, f.mapType = kindMap, v.kind, exprString(t.Value)
	default:
		return fmt.Errorf("unsupported type %s", typ)
	}
	return nil
}

// link resolves the wire structs fields refer to and marks how each
// struct is held.
func (m *model) link(byName map[string]*wireStruct) error {
	for _, s := range m.structs {
		for _, f := range s.fields {
			if f.elemName == "" {
				continue
			}
			e, ok := byName[f.elemName]
			if !ok {
				return fmt.Errorf("wiregen: %s.%s: %s is not a wire struct", s.name, f.name, f.elemName)
			}
			f.elem = e
			e.recursive = e.recursive || e == s
			switch {
			case f.kind == kindList:
				e.listed, e.listPtr = true, f.ptrElem
			case f.byvalue || (f.kind == kindStruct && f.omitempty):
				e.zeroed = true
			}
			if f.hook && !e.self {
				return fmt.Errorf("wiregen: %s.%s: a hook field's struct must be its own model", s.name, f.name)
			}
		}
	}
	return nil
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ArrayType:
		if e.Len == nil {
			return "[]" + exprString(e.Elt)
		}
	}
	return fmt.Sprintf("%T", e)
}
