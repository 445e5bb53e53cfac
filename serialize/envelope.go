package serialize

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The envelope of every msgpack blob:
//
//	offset  size  content
//	0       4     magic "MRKV"
//	4       1     format version (Version)
//	5       1     kind: 'm' machine, 't' tree, 'h' history message
//	6       4     CRC-32C (Castagnoli) of the body, big endian
//	10      …     body: one msgpack value of the wire model of that version
//
// Every future version keeps the magic and the version byte where they
// are, so any version can tell what it is reading.
const (
	magic      = "MRKV"
	headerSize = 10

	kindMachine = 'm'
	kindTree    = 't'
	kindMessage = 'h'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func kindName(k byte) string {
	switch k {
	case kindMachine:
		return "a machine"
	case kindTree:
		return "an instance tree"
	case kindMessage:
		return "a history message"
	}
	return fmt.Sprintf("unknown kind %q", k)
}

// header starts a blob of kind k in b (which should be empty): the body
// is appended after it, then seal fills in the checksum.
func header(b []byte, k byte) []byte {
	return append(b, magic[0], magic[1], magic[2], magic[3], Version, k, 0, 0, 0, 0)
}

// seal writes the checksum of the body into the header.
func seal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[6:10], crc32.Checksum(b[headerSize:], castagnoli))
	return b
}

// open checks the envelope of data and returns the decoder of its
// version and its body.
func open(data []byte, want byte) (bodyDecoder, []byte, error) {
	if len(data) < headerSize {
		if len(data) >= len(magic) && string(data[:len(magic)]) != magic {
			return nil, nil, fmt.Errorf("%w: not markov data (bad magic)", ErrCorrupt)
		}
		return nil, nil, fmt.Errorf("%w: truncated: %d bytes, the header alone takes %d", ErrCorrupt, len(data), headerSize)
	}
	if string(data[:len(magic)]) != magic {
		if data[0] == '{' {
			return nil, nil, fmt.Errorf("%w: not msgpack markov data (JSON? use UnmarshalJSON)", ErrCorrupt)
		}
		return nil, nil, fmt.Errorf("%w: not markov data (bad magic %q)", ErrCorrupt, data[:len(magic)])
	}
	v := data[4]
	if v == 0 {
		return nil, nil, fmt.Errorf("%w: format version 0", ErrCorrupt)
	}
	dec := decoderOf(v)
	if dec == nil {
		return nil, nil, fmt.Errorf("%w: format version %d (this build reads %s)", ErrVersion, v, readable())
	}
	if k := data[5]; k != want {
		return nil, nil, fmt.Errorf("%w: data holds %s, not %s", ErrCorrupt, kindName(k), kindName(want))
	}
	body := data[headerSize:]
	if sum := crc32.Checksum(body, castagnoli); sum != binary.BigEndian.Uint32(data[6:10]) {
		return nil, nil, fmt.Errorf("%w: checksum mismatch (truncated or corrupted)", ErrCorrupt)
	}
	return dec, body, nil
}
