package scripted

import "errors"

// ErrExhausted is returned when the script has no reply left for a call.
var ErrExhausted = errors.New("scripted: no reply left")
