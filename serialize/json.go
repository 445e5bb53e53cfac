package serialize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// The JSON form: the wire model (wire.go) through encoding/json, with
// states as JSON values, wrapped as
//
//	{"format":"markov","version":1,"r":{…root…},"h":[…history…]}
//
// Raw JSON values (tool inputs, metadata, payloads) are embedded as JSON:
// they keep their meaning but not their insignificant whitespace. Tool-use
// data or call input that is not valid JSON is kept as base64 under "db" or
// "inb". Strings must be valid UTF-8 to survive: the msgpack form is the
// exact one.

// jsonFormat is the format name of the JSON form.
const jsonFormat = "markov"

// MarshalJSON encodes the machine in the JSON form: the same wire model as
// Marshal, for debugging and interop. Call it between runs.
func MarshalJSON(m *machine.Machine) ([]byte, error) {
	doc := jsonDoc{Format: jsonFormat, Version: Version}
	_, err := encodeMachine(m, jsonStates{}, 0, func(e *encoder, mm *machineModel) {
		e.toWireMachine(mm, &doc.wireMachine)
	})
	if err != nil {
		return nil, err
	}
	b, err := encodeJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	return b, nil
}

// UnmarshalJSON decodes a machine written by MarshalJSON for the charter
// c, like Unmarshal.
func UnmarshalJSON(c *machine.Charter, data []byte) (*machine.Machine, error) {
	if c == nil {
		return nil, errors.New("serialize: nil charter")
	}
	var doc jsonDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		// A newer version may have another shape: report the version.
		var h struct {
			Format  string `json:"format"`
			Version int    `json:"version"`
		}
		if json.Unmarshal(data, &h) == nil && h.Format == jsonFormat && h.Version > Version {
			return nil, fmt.Errorf("%w: format version %d (this build reads %s)", ErrVersion, h.Version, readable())
		}
		if bytes.HasPrefix(data, []byte(magic)) {
			return nil, fmt.Errorf("%w: msgpack data, not JSON: use Unmarshal", ErrCorrupt)
		}
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if doc.Format != jsonFormat {
		return nil, fmt.Errorf("%w: not a markov machine (format %q)", ErrCorrupt, doc.Format)
	}
	if doc.Version < 1 {
		return nil, fmt.Errorf("%w: no format version", ErrCorrupt)
	}
	if doc.Version != Version {
		return nil, fmt.Errorf("%w: format version %d (this build reads %s)", ErrVersion, doc.Version, readable())
	}
	if doc.Root == nil {
		return nil, fmt.Errorf("%w: machine without a root instance", ErrCorrupt)
	}
	d := decoder{c: c}
	var mm machineModel
	if err := d.fromWireMachine(&doc.wireMachine, &mm); err != nil {
		return nil, err
	}
	return machine.Restore(c, mm.Root, message.NewHistory(mm.History))
}
