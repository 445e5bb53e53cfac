package backend

import (
	"encoding/json"
	"fmt"

	"github.com/markov-agents/markov/store"
)

// EncodeMachineChange encodes c for the machine column of a suspension
// feed row (NULL, nil here, for a suspension change).
func EncodeMachineChange(c store.MachineChange) ([]byte, error) {
	return json.Marshal(c)
}

// DecodeMachineChange decodes the machine column of a suspension feed
// row: nil for a suspension change (NULL).
func DecodeMachineChange(raw []byte) (*store.MachineChange, error) {
	if raw == nil {
		return nil, nil
	}
	var c store.MachineChange
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("decode a machine change of the feed: %w", err)
	}
	return &c, nil
}

// Parked adds reason to errs, the errors a parked machine has at its
// revision, and keeps the latest store.MaxParkedErrors.
func Parked(errs []string, reason string) []string {
	errs = append(errs, reason)
	return errs[max(0, len(errs)-store.MaxParkedErrors):]
}
