package fleet

import "errors"

var (
	// ErrInvalidConfig reports a Config New cannot build a Fleet from.
	ErrInvalidConfig = errors.New("fleet: invalid config")
	// ErrCorruptInbox reports an inbox entry that does not decode; it is
	// dropped and logged.
	ErrCorruptInbox = errors.New("fleet: corrupt inbox entry")
)
