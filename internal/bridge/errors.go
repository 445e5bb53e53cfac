package bridge

import "errors"

var (
	// ErrInvalidConfig reports a Config New cannot build a Bridge from.
	ErrInvalidConfig = errors.New("bridge: invalid config")
	// ErrBadToken reports a continuation token that is malformed, was
	// tampered with, or was signed with another secret.
	ErrBadToken = errors.New("bridge: bad continuation token")
	// ErrTokenExpired reports a continuation token past its expiry.
	ErrTokenExpired = errors.New("bridge: continuation token expired")
	// ErrNotInToken reports an answer for a suspension its token does not
	// name.
	ErrNotInToken = errors.New("bridge: suspension not named by the token")
	// ErrInvalidAnswer reports an answer that cannot be applied: an
	// unknown action, or a suspension answered twice in one set.
	ErrInvalidAnswer = errors.New("bridge: invalid answer")
)
