package a2a

import "errors"

var (
	// ErrInvalidConfig reports a ServerConfig NewServer cannot serve.
	ErrInvalidConfig = errors.New("a2a: invalid config")
	// ErrBadAnswer reports a message on a task that answers none of its
	// suspensions: no part to answer with, a part that names a
	// suspension the task is not waiting on, or several suspensions
	// pending and the part names none. On the wire it is an A2A
	// invalid-params error.
	ErrBadAnswer = errors.New("a2a: message does not answer the task")
	// ErrAlreadyAnswered reports an answer to a suspension that another
	// answer resolved first. On the wire it is an A2A invalid-params
	// error.
	ErrAlreadyAnswered = errors.New("a2a: suspension already answered")
	// ErrDecidedElsewhere reports an answer to a suspension that is not
	// the A2A client's to decide (the task is auth-required). On the
	// wire it is an A2A invalid-params error.
	ErrDecidedElsewhere = errors.New("a2a: suspension is decided elsewhere")
)
