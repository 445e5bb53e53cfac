package durable

import "errors"

// ErrInvalidConfig reports a Config New cannot build a Runner from: no
// Store or no Charter.
var ErrInvalidConfig = errors.New("durable: invalid config")
