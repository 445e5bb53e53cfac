package executor

import (
	"errors"
	"fmt"
	"time"
)

// Errors of effects that fail validation, and of IDs a caller chose that
// are taken. Tools see them as error results; commands return them.
var (
	// ErrDuplicateID: an instance or suspend ID chosen by the caller is
	// already in use in the tree.
	ErrDuplicateID = errors.New("executor: ID already in use")
	// ErrUnknownNode: a transition names a node the charter does not have.
	ErrUnknownNode = errors.New("executor: unknown node")
	// ErrCedeFromRoot: the root instance has no parent to cede to.
	ErrCedeFromRoot = errors.New("executor: root instance cannot cede")
	// ErrPrimaryConflict: the effect would leave more than one non-worker
	// leaf.
	ErrPrimaryConflict = errors.New("executor: at most one non-worker leaf may be active")
	// ErrTransitionLimit: a reply asked for more than one transition.
	ErrTransitionLimit = errors.New("executor: only one transition per reply")
	// ErrEmptySpawn: a spawn names no children.
	ErrEmptySpawn = errors.New("executor: spawn without children")
)

// ErrNoResponse reports a model that returned neither a response nor an
// error.
var ErrNoResponse = errors.New("executor: model returned no response")

// ErrToolTimeout is wrapped by the error of a tool call that outlived its
// timeout (node.Timeout, or Config.ToolTimeout), a *ToolTimeoutError.
var ErrToolTimeout = errors.New("executor: tool call timed out")

// ToolTimeoutError is the error of a tool call that outlived its timeout.
// The model sees it as the result "tool NAME timed out after D". It wraps
// ErrToolTimeout.
type ToolTimeoutError struct {
	Tool  string
	After time.Duration
}

// Error reads "tool NAME timed out after D": the text the model sees.
func (e *ToolTimeoutError) Error() string {
	return fmt.Sprintf("tool %s timed out after %s", e.Tool, e.After)
}

// Unwrap returns ErrToolTimeout.
func (e *ToolTimeoutError) Unwrap() error { return ErrToolTimeout }
