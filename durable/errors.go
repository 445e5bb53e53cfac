package durable

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig reports a Config New cannot build a Runner from: no
	// Store or no Charter.
	ErrInvalidConfig = errors.New("durable: invalid config")
	// ErrUnsupported reports a call that needs an optional capability the
	// Runner's store lacks: Machines needs a store.MachineLister, Sweep and
	// RunSweeper a store.ExpiryClaimer. It wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("durable: not supported by the store: %w", errors.ErrUnsupported)
	// ErrRejected wraps the error of inputs a run could not apply (an
	// unknown or resolved suspension, a payload that fails its schema, a
	// failing command): the machine is unchanged. A coordinator drops such
	// an input rather than retrying it.
	ErrRejected = errors.New("durable: input rejected")
	// ErrBusy: a run holds the machine now (Runner.AcceptContinue does
	// not wait for it).
	ErrBusy = errors.New("durable: the machine is running")
	// ErrEventFormat reports a logged or live event that does not decode:
	// malformed, or of a format version (EventFormat) this package does
	// not know.
	ErrEventFormat = errors.New("durable: malformed event")
)

// ErrInvalidSuspend reports a Runner.Suspend request that cannot be made:
// an unknown mode, or a condition its instance option refuses (an invalid
// event name wraps instance.ErrInvalidEvent too). Nothing was changed.
var ErrInvalidSuspend = errors.New("durable: invalid suspend request")
