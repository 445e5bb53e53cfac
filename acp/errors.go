package acp

import "errors"

var (
	// ErrInvalidConfig reports a Config New cannot build an Agent from: no
	// Runner or no Node, or a Node the charter does not have.
	ErrInvalidConfig = errors.New("acp: invalid config")
	// ErrInvalidParams reports the params of a request that do not decode
	// or do not satisfy the wire format (an unknown mode, a negative
	// timeout, an empty session ID). The request changes nothing.
	ErrInvalidParams = errors.New("acp: invalid params")
	// ErrUnknownSession reports a session ID that names no stored machine.
	ErrUnknownSession = errors.New("acp: unknown session")
	// ErrBusy reports a prompt sent to a session that is already running
	// one.
	ErrBusy = errors.New("acp: session busy")
	// ErrNotSuspended reports a resume of a session with nothing to
	// resume, or of a handle that is not one of its pending suspensions.
	ErrNotSuspended = errors.New("acp: session not suspended")
)
