package serialize

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The pinned msgpack configuration for user state values. It never
// changes within a format version:
//
//   - struct fields are named by their msgpack tag, else their json tag,
//     else the Go field name (SetCustomStructTag("json")), so a state type
//     written for encoding/json encodes by its JSON names;
//   - map keys are sorted, so equal states give equal bytes;
//   - integers take their smallest encoding (UseCompactInts);
//   - values decoded into interface fields use int64, uint64, float64,
//     string, []any and map[string]any (UseLooseInterfaceDecoding and a
//     map decoder with string keys), the shapes JSON gives them;
//   - times are timestamps, decoded as UTC;
//   - decoding into a struct fails on a key the struct has no field for
//     (DisallowUnknownFields), at any depth.
func newEncoder() *msgpack.Encoder {
	e := msgpack.NewEncoder(nil)
	e.SetSortMapKeys(true)
	e.SetCustomStructTag("json")
	e.UseCompactInts(true)
	return e
}

func newDecoder() *msgpack.Decoder {
	d := msgpack.NewDecoder(nil)
	d.SetCustomStructTag("json")
	d.UseLooseInterfaceDecoding(true)
	d.SetMapDecoder(decodeStringMap)
	d.DisallowUnknownFields(true)
	return d
}

// decodeStringMap decodes a map inside an interface value as
// map[string]any, writing integer keys in decimal as encoding/json does.
func decodeStringMap(d *msgpack.Decoder) (any, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, err
	}
	m := make(map[string]any, min(n, 64))
	for range n {
		k, err := d.DecodeInterfaceLoose()
		if err != nil {
			return nil, err
		}
		var key string
		switch k := k.(type) {
		case string:
			key = k
		case int64:
			key = strconv.FormatInt(k, 10)
		case uint64:
			key = strconv.FormatUint(k, 10)
		default:
			return nil, fmt.Errorf("map key of type %T", k)
		}
		v, err := d.DecodeInterfaceLoose()
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	return m, nil
}

// appendWriter lets a msgpack.Encoder append to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *appendWriter) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }

type stateEncoder struct {
	w   appendWriter
	enc *msgpack.Encoder
}

type stateDecoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var (
	encoders = sync.Pool{New: func() any { return &stateEncoder{enc: newEncoder()} }}
	decoders = sync.Pool{New: func() any {
		d := &stateDecoder{dec: newDecoder()}
		return d
	}}
)

// maxStateDepth bounds the nesting of one state value.
const maxStateDepth = 512

// stateCodec is how values of one state type are encoded.
type stateCodec struct {
	typ reflect.Type
	// asJSON: the type has JSON methods msgpack would ignore, so its
	// values are stored as JSON bytes.
	asJSON bool
	// fixTimes: values may hold times, set to UTC after decoding.
	fixTimes bool
}

var codecs sync.Map // reflect.Type → *stateCodec

func codecFor(t reflect.Type) *stateCodec {
	if c, ok := codecs.Load(t); ok {
		return c.(*stateCodec)
	}
	c := &stateCodec{
		typ:      t,
		asJSON:   needsJSON(t, map[reflect.Type]bool{}),
		fixTimes: mayHoldTime(t, map[reflect.Type]bool{}),
	}
	codecs.Store(t, c)
	return c
}

var (
	jsonMarshaler    = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler  = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler    = reflect.TypeFor[encoding.TextMarshaler]()
	binaryMarshaler  = reflect.TypeFor[encoding.BinaryMarshaler]()
	msgpackMarshaler = reflect.TypeFor[msgpack.Marshaler]()
	msgpackCustomEnc = reflect.TypeFor[msgpack.CustomEncoder]()
	textDecoder      = reflect.TypeFor[encoding.TextUnmarshaler]()
	binaryDecoder    = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	msgpackDecoder   = reflect.TypeFor[msgpack.Unmarshaler]()
	msgpackCustomDec = reflect.TypeFor[msgpack.CustomDecoder]()
	anyType          = reflect.TypeFor[any]()
	timeType         = reflect.TypeFor[time.Time]()
	byteSliceType    = reflect.TypeFor[[]byte]()
	rawMessageType   = reflect.TypeFor[json.RawMessage]()
)

func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// needsJSON reports whether t (or a type it holds) has JSON encoding
// methods and no encoding methods msgpack uses: msgpack would encode its
// fields instead and could lose what the JSON methods keep.
func needsJSON(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	if decided, asJSON := encodingMethods(t); decided {
		return asJSON
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return needsJSON(t.Elem(), seen)
	case reflect.Map:
		return needsJSON(t.Key(), seen) || needsJSON(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if fieldNeedsJSON(t.Field(i), seen) {
				return true
			}
		}
	}
	return false
}

// encodingMethods reports whether t's methods decide how it is stored,
// and if so whether as JSON: msgpack uses its own, binary and text
// methods (and handles times and raw JSON); JSON methods alone need JSON.
func encodingMethods(t reflect.Type) (decided, asJSON bool) {
	switch {
	case t == timeType || t == rawMessageType:
		return true, false
	case implements(t, msgpackMarshaler) || implements(t, msgpackCustomEnc) ||
		implements(t, binaryMarshaler) || implements(t, textMarshaler):
		return true, false
	case implements(t, jsonMarshaler) || implements(t, jsonUnmarshaler):
		return true, true
	}
	return false, false
}

// fieldNeedsJSON reports whether struct field f makes its struct need
// JSON.
func fieldNeedsJSON(f reflect.StructField, seen map[reflect.Type]bool) bool {
	switch {
	case !f.IsExported() && !f.Anonymous:
		return false
	case f.Anonymous && f.Type.Kind() == reflect.Pointer:
		// msgpack gives a nil embedded pointer a value; JSON keeps it nil.
		return true
	case f.Type.Kind() == reflect.Interface && omitsEmpty(f):
		// msgpack omits an interface holding false, 0 or "" that JSON
		// keeps.
		return true
	}
	return needsJSON(f.Type, seen)
}

// omitsEmpty reports whether f has the omitempty option in the tag msgpack
// reads (msgpack, else json).
func omitsEmpty(f reflect.StructField) bool {
	tag, ok := f.Tag.Lookup("msgpack")
	if !ok {
		tag = f.Tag.Get("json")
	}
	_, opts, _ := strings.Cut(tag, ",")
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == "omitempty" {
			return true
		}
	}
	return false
}

// mayHoldTime reports whether a value of t may hold a time.Time.
func mayHoldTime(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == timeType || t.Kind() == reflect.Interface {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return mayHoldTime(t.Elem(), seen)
	case reflect.Map:
		return mayHoldTime(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); (f.IsExported() || f.Anonymous) && mayHoldTime(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// appendState appends the msgpack encoding of v.
func appendState(b []byte, v any) ([]byte, error) {
	e := encoders.Get().(*stateEncoder)
	e.w.b = b
	e.enc.ResetWriter(&e.w) // a fresh intern dictionary per state
	err := e.enc.Encode(v)
	b = e.w.b
	e.w.b = nil
	encoders.Put(e)
	if err != nil {
		return b, fmt.Errorf("%w: state of type %T: %w", ErrEncode, v, err)
	}
	return b, nil
}

// decodeState decodes one msgpack value, whose structure the caller
// checked, into a new value of the codec's type.
func (c *stateCodec) decode(raw []byte) (v any, err error) {
	p := reflect.New(c.typ)
	d := decoders.Get().(*stateDecoder)
	d.r.Reset(raw)
	d.dec.ResetReader(&d.r)
	d.dec.SetMapDecoder(decodeStringMap)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("msgpack decoder panicked: %v", r)
		}
		d.dec.ResetReader(nil)
		decoders.Put(d)
	}()
	if err := d.dec.DecodeValue(p.Elem()); err != nil {
		if c.typ == anyType {
			return nil, err
		}
		untyped, uerr := codecFor(anyType).decode(raw)
		if uerr != nil {
			return nil, err
		}
		return nil, strictError(c.typ, untyped, true, err)
	}
	if d.r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", d.r.Len())
	}
	if c.fixTimes {
		toUTC(p.Elem())
	}
	return p.Elem().Interface(), nil
}

// encodeJSON returns v as JSON, without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // drop Encode's newline
}

// decodeJSON decodes JSON into a new value of the codec's type, strictly
// as in the msgpack form: a field the type lacks is an error. The common
// case takes json.Unmarshal and a scan of the keys (knownKeys); a failure,
// or a key the scan does not find, goes to a strict json.Decoder, which
// decides.
func (c *stateCodec) decodeJSON(raw []byte) (any, error) {
	p := reflect.New(c.typ)
	err := json.Unmarshal(raw, p.Interface())
	if err == nil && knownKeys(c.typ, raw) {
		return p.Elem().Interface(), nil
	}
	p = reflect.New(c.typ)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	serr := dec.Decode(p.Interface())
	if serr == nil && err == nil {
		return p.Elem().Interface(), nil
	}
	if serr == nil {
		serr = err
	}
	var untyped any
	if json.Unmarshal(raw, &untyped) != nil {
		return nil, serr
	}
	return nil, strictError(c.typ, untyped, false, serr)
}

// toUTC sets every time.Time reachable from the addressable v to UTC.
func toUTC(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		structToUTC(v)
	case reflect.Pointer:
		if !v.IsNil() {
			toUTC(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		if v.Type() != byteSliceType {
			for i := range v.Len() {
				toUTC(v.Index(i))
			}
		}
	case reflect.Map:
		if !v.IsNil() && codecFor(v.Type().Elem()).fixTimes {
			mapToUTC(v)
		}
	case reflect.Interface:
		if !v.IsNil() && v.CanSet() {
			if x := anyToUTC(v.Elem().Interface()); x != nil {
				v.Set(reflect.ValueOf(x))
			}
		}
	}
}

// structToUTC sets a time, or the times in a struct's settable fields,
// to UTC.
func structToUTC(v reflect.Value) {
	if v.Type() == timeType {
		if v.CanSet() {
			v.Set(reflect.ValueOf(v.Interface().(time.Time).UTC()))
		}
		return
	}
	for i := range v.NumField() {
		if f := v.Field(i); f.CanSet() {
			toUTC(f)
		}
	}
}

// mapToUTC sets the times in a map's values to UTC.
func mapToUTC(v reflect.Value) {
	iter := v.MapRange()
	for iter.Next() {
		e := reflect.New(v.Type().Elem()).Elem()
		e.Set(iter.Value())
		toUTC(e)
		v.SetMapIndex(iter.Key(), e)
	}
}

// anyToUTC returns x with its times in UTC, for the shapes msgpack
// decodes into interface values; other values are returned as they are.
func anyToUTC(x any) any {
	switch x := x.(type) {
	case time.Time:
		return x.UTC()
	case map[string]any:
		for k, v := range x {
			x[k] = anyToUTC(v)
		}
	case []any:
		for i, v := range x {
			x[i] = anyToUTC(v)
		}
	}
	return x
}
