package frame

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// maxPooledInput is the longest input unmarshal decodes with a pooled
// decoder: a decoder keeps a buffer as long as the longest input it read.
const maxPooledInput = 64 << 10

// pooledDecoder is a json.Decoder reading from a reader that unmarshal
// points at each input in turn.
type pooledDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := new(pooledDecoder)
	d.dec = json.NewDecoder(&d.r)
	return d
}}

// unmarshal decodes data, one JSON value and white space (acceptsRaw read
// it), into v as json.Unmarshal does, with a decoder from a pool: a call of
// json.Unmarshal allocates a decoding state, an error context and a
// scanner stack of its own, four allocations of every tool call. What it
// decodes shares no bytes with the decoder's buffer, which the next input
// overwrites: encoding/json copies what it keeps, and an UnmarshalJSON
// method must copy what it keeps too. A decoder that failed is not
// reused; one that read the input as broken JSON leaves the error to
// json.Unmarshal, whose words it is.
func unmarshal(data []byte, v any) error {
	if len(data) > maxPooledInput {
		return json.Unmarshal(data, v)
	}
	d := decoders.Get().(*pooledDecoder)
	d.r.Reset(data)
	err := d.dec.Decode(v)
	if err == nil {
		d.r.Reset(nil)
		decoders.Put(d)
		return nil
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok || errors.Is(err, io.ErrUnexpectedEOF) {
		return json.Unmarshal(data, v)
	}
	return err
}
