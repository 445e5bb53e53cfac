package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// CheckRequest reports whether req can be sent to a model: it is not nil
// ([ErrNilRequest]); every tool has a name and an input schema that is
// empty (adapters send an empty object schema) or a JSON object, and the
// output schema, if asked for, is a JSON object ([ErrInvalidSpec]); and
// its transcript passes [CheckPairing]. Adapters call it first in
// Generate, so a request no provider would take never reaches the network.
func CheckRequest(req *Request) error {
	if req == nil {
		return ErrNilRequest
	}
	for _, t := range req.Tools {
		if t.Name == "" {
			return fmt.Errorf("%w: a tool has no name", ErrInvalidSpec)
		}
		if len(t.InputSchema) > 0 && !isObject(t.InputSchema) {
			return fmt.Errorf("%w: tool %q: input schema is not a JSON object", ErrInvalidSpec, t.Name)
		}
	}
	if req.Output != nil && !isObject(req.Output.Schema) {
		return fmt.Errorf("%w: output %q: schema is not a JSON object", ErrInvalidSpec, req.Output.Name)
	}
	return CheckPairing(req.Messages)
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}
