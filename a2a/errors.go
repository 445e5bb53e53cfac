package a2a

import "errors"

var (
	// ErrInvalidConfig reports a Config NewRemote cannot build a Remote
	// from, or a ServerConfig NewServer cannot serve, naming the field.
	ErrInvalidConfig = errors.New("a2a: invalid config")
	// ErrRemote reports a fault of a remote agent or of the way to it: its
	// card cannot be had, it does not answer, it answers garbage or an
	// error. A call that meets one while it waits polls again later (up
	// to Config.MaxPollFailures times in a row); otherwise the tool's
	// result is an error the model sees.
	ErrRemote = errors.New("a2a: remote agent fault")
	// ErrForbiddenAddress reports an outbound connection, or a push URL,
	// to a private, loopback, link-local or unspecified address, which
	// Config.AllowPrivate does not allow.
	ErrForbiddenAddress = errors.New("a2a: forbidden address")
	// ErrInvalidNotification reports an inbound push notification that
	// is not one: not a POST, no token, a body that is not an A2A
	// StreamResponse naming a task.
	ErrInvalidNotification = errors.New("a2a: invalid push notification")
	// ErrUnknownTask reports a push notification no call waits for: its
	// task is unknown here, finished, or the token is wrong. Nothing
	// changes.
	ErrUnknownTask = errors.New("a2a: no call waits for this task")
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
