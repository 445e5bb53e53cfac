package serialize

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Minimal msgpack primitives for the hand-written wire codec. The writers
// produce the same bytes as github.com/vmihailenco/msgpack/v5 with the
// pinned configuration (compact integers, str8, timestamp extension); the
// reader checks every length against the bytes left, so no header can make
// it allocate more than the input holds.

// msgpack type codes used here.
const (
	mpNil      = 0xc0
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpBin8     = 0xc4
	mpBin16    = 0xc5
	mpBin32    = 0xc6
	mpExt8     = 0xc7
	mpExt16    = 0xc8
	mpExt32    = 0xc9
	mpFloat32  = 0xca
	mpFloat64  = 0xcb
	mpUint8    = 0xcc
	mpUint16   = 0xcd
	mpUint32   = 0xce
	mpUint64   = 0xcf
	mpInt8     = 0xd0
	mpInt16    = 0xd1
	mpInt32    = 0xd2
	mpInt64    = 0xd3
	mpFixExt1  = 0xd4
	mpFixExt2  = 0xd5
	mpFixExt4  = 0xd6
	mpFixExt8  = 0xd7
	mpFixExt16 = 0xd8
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	mpArray16  = 0xdc
	mpArray32  = 0xdd
	mpMap16    = 0xde
	mpMap32    = 0xdf

	mpTimeExt = -1
)

// appendLen appends a length header in its smallest form: fix|n when n is
// below fixLimit, else the 8-bit form (when c8 is not 0), the 16-bit one or
// the 32-bit one.
func appendLen(b []byte, n int, fix byte, fixLimit int, c8, c16, c32 byte) []byte {
	switch {
	case n < fixLimit:
		return append(b, fix|byte(n))
	case c8 != 0 && n <= math.MaxUint8:
		return append(b, c8, byte(n))
	case n <= math.MaxUint16:
		return append(b, c16, byte(n>>8), byte(n))
	}
	return append(b, c32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendMapLen(b []byte, n int) []byte {
	return appendLen(b, n, 0x80, 16, 0, mpMap16, mpMap32)
}

func appendArrayLen(b []byte, n int) []byte {
	return appendLen(b, n, 0x90, 16, 0, mpArray16, mpArray32)
}

func appendStr(b []byte, s string) []byte {
	return append(appendLen(b, len(s), 0xa0, 32, mpStr8, mpStr16, mpStr32), s...)
}

// appendKey appends a map key (a short string).
func appendKey(b []byte, k string) []byte {
	b = append(b, 0xa0|byte(len(k)))
	return append(b, k...)
}

func appendBin(b []byte, p []byte) []byte {
	return append(appendLen(b, len(p), 0, 0, mpBin8, mpBin16, mpBin32), p...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, mpTrue)
	}
	return append(b, mpFalse)
}

func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, mpUint8, byte(n))
	case n <= math.MaxUint16:
		return append(b, mpUint16, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, mpUint32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint64(append(b, mpUint64), n)
}

func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, mpInt8, byte(n))
	case n >= math.MinInt16:
		return append(b, mpInt16, byte(n>>8), byte(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, mpInt32), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, mpInt64), uint64(n))
}

// appendTime appends t as a msgpack timestamp (extension -1), in the
// smallest of its three layouts.
func appendTime(b []byte, t time.Time) []byte {
	secs := uint64(t.Unix())
	if secs>>34 == 0 {
		data := uint64(t.Nanosecond())<<34 | secs
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(b, mpFixExt4, 0xff), uint32(data))
		}
		return binary.BigEndian.AppendUint64(append(b, mpFixExt8, 0xff), data)
	}
	b = append(b, mpExt8, 12, 0xff)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
	return binary.BigEndian.AppendUint64(b, secs)
}

// reader decodes msgpack from a byte slice. Strings are cut from str, one
// copy of the whole input, so decoding a string does not allocate.
type reader struct {
	b   []byte
	str string
	off int
	// dict holds the strings of intern fields read so far.
	dict []string
}

// newReader returns a reader of b, with room in its dictionary for the
// strings a body of that size typically interns.
func newReader(b []byte) *reader {
	return &reader{b: b, str: string(b), dict: make([]string, 0, min(len(b)/internEvery, maxDictLen))}
}

// internEvery is how many bytes of a body typically hold one interned
// string (an instance, a suspended call, a tool use).
const internEvery = 256

// errAt returns a corruption error at the current offset.
func (r *reader) errAt(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, r.off, fmt.Sprintf(format, args...))
}

func (r *reader) eof() error { return r.errAt("unexpected end of data") }

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.eof()
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

// n reads a big-endian unsigned integer of size bytes.
func (r *reader) n(size int) (uint64, error) {
	if r.left() < size {
		return 0, r.eof()
	}
	p := r.b[r.off : r.off+size]
	r.off += size
	switch size {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	}
	return binary.BigEndian.Uint64(p), nil
}

// nilNext consumes a nil and reports true if the next value is nil.
func (r *reader) nilNext() bool {
	if r.off < len(r.b) && r.b[r.off] == mpNil {
		r.off++
		return true
	}
	return false
}

// lengthKind describes the headers of one kind of value with a length:
// maps, arrays, or strings and bytes.
type lengthKind struct {
	name string
	// A fix header holds the length: c&fixMask == fix, the length
	// c&^fixMask.
	fixMask, fix byte
	// sizes are the sizes of the length after the other type bytes (0: not
	// of this kind).
	sizes [256]uint8
	// per is the bytes left each unit of length takes at least; nilLen is
	// the length of nil.
	per    uint64
	nilLen int
	// tooLong is the message of a length beyond the bytes left.
	tooLong string
}

var (
	mapKind = lengthKind{name: "a map", fixMask: 0xf0, fix: 0x80,
		sizes: [256]uint8{mpMap16: 2, mpMap32: 4}, per: 2,
		tooLong: "header claims %d elements, only %d bytes left"}
	arrayKind = lengthKind{name: "an array", fixMask: 0xf0, fix: 0x90,
		sizes: [256]uint8{mpArray16: 2, mpArray32: 4}, per: 1,
		tooLong: "header claims %d elements, only %d bytes left"}
	bytesKind = lengthKind{name: "a string", fixMask: 0xe0, fix: 0xa0,
		sizes: [256]uint8{mpStr8: 1, mpBin8: 1, mpStr16: 2, mpBin16: 2, mpStr32: 4, mpBin32: 4}, per: 1, nilLen: -1,
		tooLong: "length %d exceeds the %d bytes left"}
)

// length reads a header of kind k and returns the length, checked against
// the bytes left, so that no header can make a reader allocate more than
// the input holds: every element takes at least one byte, every map entry
// two.
func (r *reader) length(k *lengthKind) (int, error) {
	start := r.off
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch size := k.sizes[c]; {
	case c == mpNil:
		return k.nilLen, nil
	case c&k.fixMask == k.fix:
		n = uint64(c &^ k.fixMask)
	case size > 0:
		n, err = r.n(int(size))
	default:
		r.off = start
		return 0, r.errAt("want %s, have type 0x%02x", k.name, c)
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(r.left())/k.per {
		r.off = start
		return 0, r.errAt(k.tooLong, n, r.left())
	}
	return int(n), nil
}

// mapLen and arrayLen read a map or array header (nil counts as empty).
func (r *reader) mapLen() (int, error)   { return r.length(&mapKind) }
func (r *reader) arrayLen() (int, error) { return r.length(&arrayKind) }

// bytesLen reads a str or bin header (nil gives -1).
func (r *reader) bytesLen() (int, error) { return r.length(&bytesKind) }

// ref reads a reference to an interned string if one is next.
func (r *reader) ref() (s string, ok bool, err error) {
	if r.off >= len(r.b) {
		return "", false, r.eof()
	}
	c := r.b[r.off]
	if c != mpFixExt1 && c != mpFixExt2 && c != mpFixExt4 {
		return "", false, nil
	}
	start := r.off
	size := 1 << (c - mpFixExt1)
	if r.left() < 2+size {
		return "", false, r.eof()
	}
	if r.b[r.off+1] != internExt {
		return "", false, r.errAt("want a string, have extension %d", int8(r.b[r.off+1]))
	}
	r.off += 2
	i, _ := r.n(size)
	if i >= uint64(len(r.dict)) {
		r.off = start
		return "", false, r.errAt("reference to interned string %d of %d", i, len(r.dict))
	}
	return r.dict[i], true, nil
}

// key reads a map key, without allocating unless it is a reference: the
// returned slice aliases the input.
func (r *reader) key() ([]byte, error) {
	if start, end, ok := r.fixstr(); ok { // the fast path
		return r.b[start:end], nil
	}
	if s, ok, err := r.ref(); ok || err != nil {
		return []byte(s), err
	}
	start, end, err := r.strBounds()
	return r.b[start:end], err
}

// string reads a string, or a reference to an interned one.
func (r *reader) string() (string, error) {
	if s, ok, err := r.ref(); ok || err != nil {
		return s, err
	}
	return r.plain()
}

// plain reads a string, cut from the copy of the input.
func (r *reader) plain() (string, error) {
	start, end, ok := r.fixstr() // the fast path
	var err error
	if !ok {
		start, end, err = r.strBounds()
	}
	return r.str[start:end], err
}

// fixstr moves past a fixstr, if one is next, and returns its bounds.
func (r *reader) fixstr() (start, end int, ok bool) {
	if r.off < len(r.b) {
		if c := r.b[r.off]; c&0xe0 == 0xa0 {
			if end := r.off + 1 + int(c&0x1f); end <= len(r.b) {
				start, r.off = r.off+1, end
				return start, end, true
			}
		}
	}
	return 0, 0, false
}

// strBounds reads a str or bin (nil: an empty one) and returns its bounds.
func (r *reader) strBounds() (start, end int, err error) {
	n, err := r.bytesLen()
	if err != nil || n <= 0 {
		return r.off, r.off, err
	}
	start = r.off
	r.off += n
	return start, r.off, nil
}

// istring reads an intern field: a reference to a string read before, or
// a string, numbered when long enough.
func (r *reader) istring() (string, error) {
	if s, ok, err := r.ref(); ok || err != nil {
		return s, err
	}
	s, err := r.plain()
	if err == nil && len(s) >= minInternLen && len(r.dict) < maxDictLen {
		r.dict = append(r.dict, s)
	}
	return s, err
}

// bin reads bytes into a fresh slice; nil and empty read as nil.
func (r *reader) bin() ([]byte, error) {
	n, err := r.bytesLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	p := make([]byte, n)
	copy(p, r.b[r.off:])
	r.off += n
	return p, nil
}

func (r *reader) bool() (bool, error) {
	c, err := r.byte()
	if err != nil {
		return false, err
	}
	switch c {
	case mpTrue:
		return true, nil
	case mpFalse, mpNil:
		return false, nil
	}
	r.off--
	return false, r.errAt("want a bool, have type 0x%02x", c)
}

// int reads any msgpack integer that fits an int64.
func (r *reader) int() (int64, error) {
	start := r.off
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c == mpNil:
		return 0, nil
	}
	size, signed := intSize(c)
	if size == 0 {
		r.off = start
		return 0, r.errAt("want an integer, have type 0x%02x", c)
	}
	v, err := r.n(size)
	if err != nil {
		return 0, err
	}
	if signed {
		shift := 64 - 8*size // sign-extend the size bytes
		return int64(v<<shift) >> shift, nil
	}
	if v > math.MaxInt64 {
		r.off = start
		return 0, r.errAt("integer %d out of range", v)
	}
	return int64(v), nil
}

// intSize returns the size in bytes of the integer of type c and whether
// it is signed; 0 when c is not an integer type with a payload.
func intSize(c byte) (int, bool) {
	switch {
	case c >= mpUint8 && c <= mpUint64:
		return 1 << (c - mpUint8), false
	case c >= mpInt8 && c <= mpInt64:
		return 1 << (c - mpInt8), true
	}
	return 0, false
}

// intRange reads an integer within [lo, hi].
func (r *reader) intRange(lo, hi int64) (int64, error) {
	start := r.off
	v, err := r.int()
	if err != nil {
		return 0, err
	}
	if v < lo || v > hi {
		r.off = start
		return 0, r.errAt("integer %d out of range [%d, %d]", v, lo, hi)
	}
	return v, nil
}

// time reads a msgpack timestamp (or nil, the zero time) as UTC.
func (r *reader) time() (time.Time, error) {
	start := r.off
	size, err := r.timeHeader()
	if err != nil || size == 0 {
		return time.Time{}, err
	}
	if uint64(r.left()) < size {
		return time.Time{}, r.eof()
	}
	p := r.b[r.off : r.off+int(size)]
	r.off += int(size)
	t, err := timestamp(p)
	if err != nil {
		r.off = start
		return time.Time{}, r.errAt("%v", err)
	}
	if t.Equal(zeroTime) {
		return time.Time{}, nil
	}
	return t.UTC(), nil
}

// timeHeader reads the header of a timestamp and returns the size of its
// data: 0 for nil.
func (r *reader) timeHeader() (uint64, error) {
	start := r.off
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var size uint64
	switch c {
	case mpNil:
		return 0, nil
	case mpFixExt4:
		size = 4
	case mpFixExt8:
		size = 8
	case mpExt8:
		if size, err = r.n(1); err != nil {
			return 0, err
		}
	default:
		r.off = start
		return 0, r.errAt("want a timestamp, have type 0x%02x", c)
	}
	typ, err := r.byte()
	if err != nil {
		return 0, err
	}
	if int8(typ) != mpTimeExt {
		r.off = start
		return 0, r.errAt("want a timestamp, have extension %d", int8(typ))
	}
	return size, nil
}

// timestamp decodes the data of a msgpack timestamp in any of its three
// layouts.
func timestamp(p []byte) (time.Time, error) {
	var secs, nsec uint64
	switch len(p) {
	case 4:
		secs = uint64(binary.BigEndian.Uint32(p))
	case 8:
		v := binary.BigEndian.Uint64(p)
		secs, nsec = v&0x3ffffffff, v>>34
	case 12:
		secs, nsec = binary.BigEndian.Uint64(p[4:]), uint64(binary.BigEndian.Uint32(p))
	default:
		return time.Time{}, fmt.Errorf("timestamp of %d bytes", len(p))
	}
	if nsec >= 1e9 {
		return time.Time{}, fmt.Errorf("timestamp nanoseconds %d out of range", nsec)
	}
	return time.Unix(int64(secs), int64(nsec)), nil
}

var zeroTime = time.Time{}

// skip skips one value of any type, iteratively: it keeps a count of the
// values left to skip instead of recursing, so nesting costs nothing.
func (r *reader) skip() error {
	_, err := r.value(0)
	return err
}

// value skips one value, checking that it nests no deeper than maxDepth
// when maxDepth > 0, and returns its bytes (aliasing the input). It keeps
// a count of the values left to skip instead of recursing and, with a
// depth limit, per open container the values it still holds.
func (r *reader) value(maxDepth int) ([]byte, error) {
	start := r.off
	var buf [16]uint64 // enough for most values: no allocation
	stack := buf[:0]
	var total uint64 = 1
	for total > 0 {
		total--
		if maxDepth > 0 {
			stack = nextValue(stack)
		}
		c, err := r.byte()
		if err != nil {
			return nil, err
		}
		skip, elems, err := r.valueHeader(c)
		if err != nil {
			return nil, err
		}
		if skip > uint64(r.left()) {
			return nil, r.errAt("length %d exceeds the %d bytes left", skip, r.left())
		}
		r.off += int(skip)
		if elems > uint64(r.left()) {
			return nil, r.errAt("header claims %d elements, only %d bytes left", elems, r.left())
		}
		total += elems
		if elems > 0 && maxDepth > 0 {
			if len(stack) >= maxDepth {
				return nil, fmt.Errorf("%w: at byte %d: %w: values nest deeper than %d", ErrCorrupt, r.off, ErrLimit, maxDepth)
			}
			stack = append(stack, elems)
		}
	}
	return r.b[start:r.off:r.off], nil
}

// nextValue takes one value off the count of the innermost open container
// of stack, closing those with none left.
func nextValue(stack []uint64) []uint64 {
	for len(stack) > 0 && stack[len(stack)-1] == 0 {
		stack = stack[:len(stack)-1]
	}
	if len(stack) > 0 {
		stack[len(stack)-1]--
	}
	return stack
}

// valueHeader reads the header of a value of type c (read) and returns
// the bytes of its body and the values it holds.
func (r *reader) valueHeader(c byte) (skip, elems uint64, err error) {
	switch {
	case c <= 0x7f, c >= 0xe0, c == mpNil, c == mpFalse, c == mpTrue:
		return 0, 0, nil
	case c&0xe0 == 0xa0:
		return uint64(c & 0x1f), 0, nil
	case c&0xf0 == 0x80:
		return 0, 2 * uint64(c&0x0f), nil
	case c&0xf0 == 0x90:
		return 0, uint64(c & 0x0f), nil
	}
	h := headers[c]
	if !h.valid {
		r.off--
		return 0, 0, r.errAt("invalid type 0x%02x", c)
	}
	var n uint64
	if h.lenSize > 0 {
		if n, err = r.n(h.lenSize); err != nil {
			return 0, 0, err
		}
	}
	if h.perElem > 0 {
		return 0, n * h.perElem, nil
	}
	return n + h.fixed, 0, nil
}

// valueHeaderInfo describes the types of value header whose first byte is not
// enough: the size of the length that follows, the bytes of the body
// besides what the length counts, and, for containers, the values per
// element the length counts.
type valueHeaderInfo struct {
	valid   bool
	lenSize int
	fixed   uint64
	perElem uint64
}

var headers = [256]valueHeaderInfo{
	mpBin8: {true, 1, 0, 0}, mpStr8: {true, 1, 0, 0},
	mpBin16: {true, 2, 0, 0}, mpStr16: {true, 2, 0, 0},
	mpBin32: {true, 4, 0, 0}, mpStr32: {true, 4, 0, 0},
	mpExt8: {true, 1, 1, 0}, mpExt16: {true, 2, 1, 0}, mpExt32: {true, 4, 1, 0}, // the type byte
	mpFloat32: {true, 0, 4, 0}, mpFloat64: {true, 0, 8, 0},
	mpUint8: {true, 0, 1, 0}, mpInt8: {true, 0, 1, 0},
	mpUint16: {true, 0, 2, 0}, mpInt16: {true, 0, 2, 0},
	mpUint32: {true, 0, 4, 0}, mpInt32: {true, 0, 4, 0},
	mpUint64: {true, 0, 8, 0}, mpInt64: {true, 0, 8, 0},
	mpFixExt1: {true, 0, 2, 0}, mpFixExt2: {true, 0, 3, 0}, mpFixExt4: {true, 0, 5, 0},
	mpFixExt8: {true, 0, 9, 0}, mpFixExt16: {true, 0, 17, 0},
	mpArray16: {true, 2, 0, 1}, mpArray32: {true, 4, 0, 1},
	mpMap16: {true, 2, 0, 2}, mpMap32: {true, 4, 0, 2},
}
