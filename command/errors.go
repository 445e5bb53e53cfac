package command

import "errors"

// Errors a command invocation can fail with. Each is returned wrapped; the
// machine is unchanged.
var (
	// ErrUnknownCommand: no command of that name on the target instance.
	ErrUnknownCommand = errors.New("command: unknown command")
	// ErrNoTarget: the invocation names no instance and there is no primary
	// leaf, or the named instance does not exist.
	ErrNoTarget = errors.New("command: no target instance")
	// ErrFailed: the command's handler returned an error (or panicked,
	// then the error also wraps instance.ErrPanic); see Failed.
	ErrFailed = errors.New("command: failed")
)

// Failed returns the error of the command name whose handler returned
// err: it reads "command name: err" and matches both ErrFailed and err
// with errors.Is.
func Failed(name string, err error) error { return &failedError{name: name, err: err} }

type failedError struct {
	name string
	err  error
}

func (e *failedError) Error() string { return "command " + e.name + ": " + e.err.Error() }

func (e *failedError) Unwrap() []error { return []error{ErrFailed, e.err} }
