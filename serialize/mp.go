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

// container reads a map or array header (nil counts as empty) and checks
// that the elements can fit in the bytes left: every element takes at
// least one byte, every map entry two.
func (r *reader) container(isMap bool) (int, error) {
	start := r.off
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c == mpNil:
		return 0, nil
	case isMap && c&0xf0 == 0x80:
		n = uint64(c & 0x0f)
	case !isMap && c&0xf0 == 0x90:
		n = uint64(c & 0x0f)
	case isMap && c == mpMap16, !isMap && c == mpArray16:
		n, err = r.n(2)
	case isMap && c == mpMap32, !isMap && c == mpArray32:
		n, err = r.n(4)
	default:
		r.off = start
		if isMap {
			return 0, r.errAt("want a map, have type 0x%02x", c)
		}
		return 0, r.errAt("want an array, have type 0x%02x", c)
	}
	if err != nil {
		return 0, err
	}
	per := uint64(1)
	if isMap {
		per = 2
	}
	if n > uint64(r.left())/per {
		r.off = start
		return 0, r.errAt("header claims %d elements, only %d bytes left", n, r.left())
	}
	return int(n), nil
}

func (r *reader) mapLen() (int, error)   { return r.container(true) }
func (r *reader) arrayLen() (int, error) { return r.container(false) }

// bytesLen reads a str or bin header and returns the length, checked
// against the bytes left.
func (r *reader) bytesLen() (int, error) {
	start := r.off
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == mpStr8, c == mpBin8:
		n, err = r.n(1)
	case c == mpStr16, c == mpBin16:
		n, err = r.n(2)
	case c == mpStr32, c == mpBin32:
		n, err = r.n(4)
	case c == mpNil:
		return -1, nil
	default:
		r.off = start
		return 0, r.errAt("want a string, have type 0x%02x", c)
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(r.left()) {
		r.off = start
		return 0, r.errAt("length %d exceeds the %d bytes left", n, r.left())
	}
	return int(n), nil
}

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
	if r.off < len(r.b) { // fast path: a fixstr
		if c := r.b[r.off]; c&0xe0 == 0xa0 {
			if end := r.off + 1 + int(c&0x1f); end <= len(r.b) {
				p := r.b[r.off+1 : end]
				r.off = end
				return p, nil
			}
		}
	}
	if s, ok, err := r.ref(); ok || err != nil {
		return []byte(s), err
	}
	n, err := r.bytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

// string reads a string, or a reference to an interned one.
func (r *reader) string() (string, error) {
	if s, ok, err := r.ref(); ok || err != nil {
		return s, err
	}
	return r.plain()
}

func (r *reader) plain() (string, error) {
	if r.off < len(r.b) { // fast path: a fixstr
		if c := r.b[r.off]; c&0xe0 == 0xa0 {
			if end := r.off + 1 + int(c&0x1f); end <= len(r.b) {
				s := r.str[r.off+1 : end]
				r.off = end
				return s, nil
			}
		}
	}
	n, err := r.bytesLen()
	if err != nil || n <= 0 {
		return "", err
	}
	s := r.str[r.off : r.off+n]
	r.off += n
	return s, nil
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
	}
	var v uint64
	switch c {
	case mpNil:
		return 0, nil
	case mpUint8, mpInt8:
		v, err = r.n(1)
	case mpUint16, mpInt16:
		v, err = r.n(2)
	case mpUint32, mpInt32:
		v, err = r.n(4)
	case mpUint64, mpInt64:
		v, err = r.n(8)
	default:
		r.off = start
		return 0, r.errAt("want an integer, have type 0x%02x", c)
	}
	if err != nil {
		return 0, err
	}
	switch c {
	case mpInt8:
		return int64(int8(v)), nil
	case mpInt16:
		return int64(int16(v)), nil
	case mpInt32:
		return int64(int32(v)), nil
	case mpInt64:
		return int64(v), nil
	case mpUint64:
		if v > math.MaxInt64 {
			r.off = start
			return 0, r.errAt("integer %d out of range", v)
		}
	}
	return int64(v), nil
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
	c, err := r.byte()
	if err != nil {
		return time.Time{}, err
	}
	var size uint64
	switch c {
	case mpNil:
		return time.Time{}, nil
	case mpFixExt4:
		size = 4
	case mpFixExt8:
		size = 8
	case mpExt8:
		size, err = r.n(1)
		if err != nil {
			return time.Time{}, err
		}
	default:
		r.off = start
		return time.Time{}, r.errAt("want a timestamp, have type 0x%02x", c)
	}
	typ, err := r.byte()
	if err != nil {
		return time.Time{}, err
	}
	if int8(typ) != mpTimeExt {
		r.off = start
		return time.Time{}, r.errAt("want a timestamp, have extension %d", int8(typ))
	}
	if uint64(r.left()) < size {
		return time.Time{}, r.eof()
	}
	p := r.b[r.off : r.off+int(size)]
	r.off += int(size)
	var t time.Time
	switch size {
	case 4:
		t = time.Unix(int64(binary.BigEndian.Uint32(p)), 0)
	case 8:
		v := binary.BigEndian.Uint64(p)
		if v>>34 >= 1e9 {
			r.off = start
			return time.Time{}, r.errAt("timestamp nanoseconds %d out of range", v>>34)
		}
		t = time.Unix(int64(v&0x3ffffffff), int64(v>>34))
	case 12:
		nsec := binary.BigEndian.Uint32(p)
		if nsec >= 1e9 {
			r.off = start
			return time.Time{}, r.errAt("timestamp nanoseconds %d out of range", nsec)
		}
		t = time.Unix(int64(binary.BigEndian.Uint64(p[4:])), int64(nsec))
	default:
		r.off = start
		return time.Time{}, r.errAt("timestamp of %d bytes", size)
	}
	if t.Equal(zeroTime) {
		return time.Time{}, nil
	}
	return t.UTC(), nil
}

var zeroTime = time.Time{}

// skip skips one value of any type, iteratively: it keeps a count of the
// values left to skip instead of recursing, so nesting costs nothing.
func (r *reader) skip() error {
	_, err := r.value(0)
	return err
}

// value skips one value, checking that it nests no deeper than maxDepth
// when maxDepth > 0, and returns its bytes (aliasing the input).
func (r *reader) value(maxDepth int) ([]byte, error) {
	start := r.off
	// stack holds, per open container, the values it still holds; with no
	// depth limit only the total is kept.
	var stack []uint64
	var total uint64 = 1
	for total > 0 {
		if maxDepth > 0 {
			for len(stack) > 0 && stack[len(stack)-1] == 0 {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 {
				stack[len(stack)-1]--
			}
		}
		total--
		c, err := r.byte()
		if err != nil {
			return nil, err
		}
		var skip, elems uint64
		switch {
		case c <= 0x7f, c >= 0xe0, c == mpNil, c == mpFalse, c == mpTrue:
		case c&0xe0 == 0xa0:
			skip = uint64(c & 0x1f)
		case c&0xf0 == 0x80:
			elems = 2 * uint64(c&0x0f)
		case c&0xf0 == 0x90:
			elems = uint64(c & 0x0f)
		default:
			switch c {
			case mpBin8, mpStr8:
				skip, err = r.n(1)
			case mpBin16, mpStr16:
				skip, err = r.n(2)
			case mpBin32, mpStr32:
				skip, err = r.n(4)
			case mpExt8:
				skip, err = r.n(1)
				skip++
			case mpExt16:
				skip, err = r.n(2)
				skip++
			case mpExt32:
				skip, err = r.n(4)
				skip++
			case mpFloat32:
				skip = 4
			case mpFloat64:
				skip = 8
			case mpUint8, mpInt8:
				skip = 1
			case mpUint16, mpInt16:
				skip = 2
			case mpUint32, mpInt32:
				skip = 4
			case mpUint64, mpInt64:
				skip = 8
			case mpFixExt1:
				skip = 2
			case mpFixExt2:
				skip = 3
			case mpFixExt4:
				skip = 5
			case mpFixExt8:
				skip = 9
			case mpFixExt16:
				skip = 17
			case mpArray16:
				elems, err = r.n(2)
			case mpArray32:
				elems, err = r.n(4)
			case mpMap16:
				elems, err = r.n(2)
				elems *= 2
			case mpMap32:
				elems, err = r.n(4)
				elems *= 2
			default:
				r.off--
				return nil, r.errAt("invalid type 0x%02x", c)
			}
			if err != nil {
				return nil, err
			}
		}
		if skip > uint64(r.left()) {
			return nil, r.errAt("length %d exceeds the %d bytes left", skip, r.left())
		}
		r.off += int(skip)
		if elems > 0 {
			if elems > uint64(r.left()) {
				return nil, r.errAt("header claims %d elements, only %d bytes left", elems, r.left())
			}
			total += elems
			if maxDepth > 0 {
				if len(stack) >= maxDepth {
					return nil, fmt.Errorf("%w: at byte %d: %w: values nest deeper than %d", ErrCorrupt, r.off, ErrLimit, maxDepth)
				}
				stack = append(stack, elems)
			}
		}
	}
	return r.b[start:r.off:r.off], nil
}
