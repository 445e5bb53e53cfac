package frame

import (
	"slices"
	"strconv"
)

// This file checks raw JSON against an acceptor without decoding it: valid
// tool input is then decoded once, straight into the handler's type. Like
// accepts, acceptsRaw only accepts; whatever it does not accept (invalid
// values, and JSON it does not care to read: escaped keys, deep nesting,
// more than 64 required properties) goes the long way — decoded, checked
// by the full validator — which decides and explains.

// maxRawDepth bounds the nesting acceptsRaw reads.
const maxRawDepth = 64

// rawScan reads JSON text b from i on.
type rawScan struct {
	b []byte
	i int
}

// acceptsRaw reports whether data is one JSON value the schema certainly
// accepts.
func (a *acceptor) acceptsRaw(data []byte) bool {
	s := rawScan{b: data}
	if !a.rawValue(&s, 0) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

func (s *rawScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte, or 0 at the end.
func (s *rawScan) next() byte {
	s.space()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// allows reports whether the acceptor takes JSON type t (nil: any value).
func (a *acceptor) allows(t string) bool {
	return a == nil || len(a.types) == 0 || slices.Contains(a.types, t) || (t == "integer" && slices.Contains(a.types, "number"))
}

// rawValue reads one value at depth; a nil acceptor takes any value.
func (a *acceptor) rawValue(s *rawScan, depth int) bool {
	if depth > maxRawDepth || (a != nil && a.never) {
		return false
	}
	switch c := s.next(); c {
	case '{':
		return a.allows("object") && a.rawObject(s, depth)
	case '[':
		return a.allows("array") && a.rawArray(s, depth)
	case '"':
		_, ok := s.str()
		return ok && a.allows("string")
	case 't', 'f', 'n':
		return a.rawLiteral(s, c)
	}
	return a.rawNumber(s)
}

// rawLiteral reads true, false or null, starting with c.
func (a *acceptor) rawLiteral(s *rawScan, c byte) bool {
	switch c {
	case 't':
		return s.literal("true") && a.allows("boolean")
	case 'f':
		return s.literal("false") && a.allows("boolean")
	}
	return s.literal("null") && a.allows("null")
}

func (s *rawScan) literal(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// str reads a string; raw is its text when it has no escapes.
func (s *rawScan) str() (raw []byte, ok bool) {
	start, plain := s.i+1, true
	for s.i++; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			if !plain {
				return nil, true
			}
			return s.b[start : s.i-1], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			plain = false
			if !s.escape() {
				return nil, false
			}
		}
	}
	return nil, false
}

// escape reads the escape at s.i (the backslash), leaving s.i on its last
// byte.
func (s *rawScan) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	s.i++
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if s.i+4 >= len(s.b) {
			return false
		}
		for _, h := range s.b[s.i+1 : s.i+5] {
			if !isHex(h) {
				return false
			}
		}
		s.i += 4
		return true
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// rawNumber reads a number and applies the type and numeric bounds.
func (a *acceptor) rawNumber(s *rawScan) bool {
	start := s.i
	if s.i == len(s.b) || !s.number() {
		return false
	}
	if a == nil {
		return true
	}
	v, err := strconv.ParseFloat(string(s.b[start:s.i]), 64)
	if err != nil {
		return false
	}
	return a.acceptsType(v) && (a.minimum == nil || v >= *a.minimum) && (a.maximum == nil || v <= *a.maximum)
}

// number reads the JSON number grammar (s.i is before the end).
func (s *rawScan) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case !s.digits():
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		return s.digits()
	}
	return true
}

// digits reads one or more digits.
func (s *rawScan) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// rawArray reads an array: item count bounds and the items schema.
func (a *acceptor) rawArray(s *rawScan, depth int) bool {
	var items *acceptor
	if a != nil {
		items = a.items
	}
	s.i++
	n := 0
	if s.next() == ']' {
		s.i++
	} else {
		for {
			if !items.rawValue(s, depth+1) {
				return false
			}
			n++
			c := s.next()
			s.i++
			if c == ']' {
				break
			}
			if c != ',' {
				return false
			}
		}
	}
	return a == nil || ((a.minItems == nil || n >= *a.minItems) && (a.maxItems == nil || n <= *a.maxItems))
}

// rawObject reads an object: properties, additional properties and
// required.
func (a *acceptor) rawObject(s *rawScan, depth int) bool {
	if a != nil && len(a.required) > 64 {
		return false
	}
	s.i++
	var seen uint64
	if s.next() == '}' {
		s.i++
		return a.hasRequired(seen)
	}
	for {
		if s.next() != '"' {
			return false
		}
		key, ok := s.str()
		if !ok || key == nil {
			return false // an escaped key: the long way
		}
		if s.next() != ':' {
			return false
		}
		s.i++
		sub, ok := a.property(key, &seen)
		if !ok || !sub.rawValue(s, depth+1) {
			return false
		}
		c := s.next()
		s.i++
		if c == '}' {
			return a.hasRequired(seen)
		}
		if c != ',' {
			return false
		}
	}
}

// property returns the acceptor of property key (nil: any value), noting
// it in seen if it is required; ok is false when no value is allowed.
func (a *acceptor) property(key []byte, seen *uint64) (sub *acceptor, ok bool) {
	if a == nil {
		return nil, true
	}
	for i, r := range a.required {
		if r == string(key) {
			*seen |= 1 << i
		}
	}
	if p, found := a.properties[string(key)]; found {
		return p, true
	}
	return a.additional, a.additional == nil || !a.additional.never
}

// hasRequired reports whether seen covers every required property.
func (a *acceptor) hasRequired(seen uint64) bool {
	return a == nil || seen == 1<<len(a.required)-1
}
