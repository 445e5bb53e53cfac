package console

import "errors"

// ErrInvalidConfig is returned by New for a Config it cannot serve.
var ErrInvalidConfig = errors.New("console: invalid config")

// ErrFormValue wraps a form field whose value does not fit the payload
// schema (a number that is not one, an option that is not offered, JSON
// that does not parse). Nothing is resumed.
var ErrFormValue = errors.New("console: form value does not fit the schema")
