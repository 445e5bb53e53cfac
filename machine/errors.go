package machine

import "errors"

// Errors of running a machine. Every error a Run yields for misuse or
// bad input wraps one of these (or a lower package's sentinel).
var (
	// errStopped ends a round whose Events caller broke out of the loop;
	// nobody sees it.
	errStopped = errors.New("machine: the caller stopped listening")
	// ErrDeadlinePassed: the suspension's deadline passed before the resume;
	// its on-timeout action applies instead.
	ErrDeadlinePassed = errors.New("machine: suspension deadline passed")
	// ErrMaxSteps: a Run took more rounds than the charter allows.
	ErrMaxSteps = errors.New("machine: max steps exceeded")
	// ErrRunning: Run (or a mutating method) was called while a Run of the
	// same machine is in progress.
	ErrRunning = errors.New("machine: machine is already running")
	// ErrBadInput: Run received an input that is not a message.Message, a
	// command.Invocation or a ResumeInput.
	ErrBadInput = errors.New("machine: bad run input")
	// ErrNoPrimary: there is no non-worker leaf to address.
	ErrNoPrimary = errors.New("machine: no primary leaf")
	// ErrInvalidTree: a restored tree does not fit its charter.
	ErrInvalidTree = errors.New("machine: invalid instance tree")
	// ErrIterReused: the sequence Run returned was ranged over a second
	// time; it is single-use (call Run again instead).
	ErrIterReused = errors.New("machine: run sequence already used")
	// ErrCallsPending: a command asked to replace or remove an instance
	// (TransitionTo, Cede) that still has pending calls. The calls belong
	// to the instance's node: the command must resolve or cancel them
	// first (command.Context.Resume), in the same command or before.
	ErrCallsPending = errors.New("machine: instance has pending calls")
)

// ErrInvalidCharter reports a charter that cannot be built: no model, no
// nodes, duplicate names, a transition to an unknown node, or tools whose
// names clash.
var ErrInvalidCharter = errors.New("machine: invalid charter")

// ErrGraphFormat reports a graph format Charter.Graph does not write.
var ErrGraphFormat = errors.New("machine: unknown graph format")

// ErrSuspendRefused reports a suspension the charter's OnSuspend hook
// refused (its error, a panic or its timeout follows): a tool call gets
// it as its error result, which the model sees; a command, a caller's
// Suspend and a durable runner's fail with it. Nothing of the suspension
// is recorded or announced.
var ErrSuspendRefused = errors.New("machine: suspension refused")
