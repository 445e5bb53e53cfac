package instance

import (
	"errors"
	"fmt"
)

// Sentinel errors of suspend and resume. Every error returned for a bad
// resume wraps one of these; none of them leaves a trace on the machine.
var (
	// ErrUnknownSuspendID: no suspension with that ID exists or ever did.
	ErrUnknownSuspendID = errors.New("instance: unknown suspend ID")
	// ErrAlreadyResolved: the suspension was resolved, expired or cancelled.
	ErrAlreadyResolved = errors.New("instance: suspension already resolved")
	// ErrNotSuspended: the target is not waiting for anything.
	ErrNotSuspended = errors.New("instance: not suspended")
	// ErrPayloadDecode: a payload, metadata or input could not be encoded or
	// decoded.
	ErrPayloadDecode = errors.New("instance: payload does not decode")
	// ErrReadOnly: the handler may read this state but not write it
	// (ancestor state, pack state from a worker, concurrent tools).
	ErrReadOnly = errors.New("instance: state is read-only here")
	// ErrInvalidState: a state value failed its node's validation.
	ErrInvalidState = errors.New("instance: invalid state")
)

// PayloadError is the error of a resume payload that its suspension's
// payload schema (SuspendedCall.PayloadSchema) rejects: the payload is not
// of the declared type, or there is none. It wraps ErrPayloadDecode; the
// suspension stays pending and nothing changed. Message is its text for a
// person (an approver, an API client).
type PayloadError struct {
	SuspendID string
	// Field is the path of the payload field at fault ("approved",
	// "items[2].amount"); empty when the payload as a whole is (missing,
	// or of the wrong type).
	Field string
	// Violation says what is wrong, short ("expected boolean, got
	// string", "required", "unknown field", "missing"); when the fault
	// has no simple description, in the schema validator's words.
	Violation string
}

// Error names the suspension, the field and the violation.
func (e *PayloadError) Error() string {
	return "instance: suspension " + e.SuspendID + ": " + e.Message()
}

// Message is the error's text for a person: the field and the violation,
// "payload: approved: expected boolean, got string".
func (e *PayloadError) Message() string {
	if e.Field == "" {
		return "payload: " + e.Violation
	}
	return "payload: " + e.Field + ": " + e.Violation
}

// Unwrap returns ErrPayloadDecode.
func (e *PayloadError) Unwrap() error { return ErrPayloadDecode }

// InputError is the error of a tool, command or transition input that its
// input schema refuses. It wraps ErrInvalidInput; nothing ran. Message is
// its text for a person (an API client, a model reading a tool result).
type InputError struct {
	// Field is the path of the input field at fault ("amount",
	// "items[2].sku"); empty when the input as a whole is.
	Field string
	// Violation says what is wrong, short, as PayloadError's does.
	Violation string
}

// Error is "instance: invalid " and the message.
func (e *InputError) Error() string { return "instance: invalid " + e.Message() }

// Message is the error's text for a person: the field and the violation,
// "input: amount: expected number, got string".
func (e *InputError) Message() string {
	if e.Field == "" {
		return "input: " + e.Violation
	}
	return "input: " + e.Field + ": " + e.Violation
}

// Unwrap returns ErrInvalidInput.
func (e *InputError) Unwrap() error { return ErrInvalidInput }

// More sentinels, for handler misuse and bad input.
var (
	// ErrSuspendWithResult: a handler returned a non-zero result together
	// with a suspension; the call fails instead of suspending.
	ErrSuspendWithResult = errors.New("instance: handler returned a result and a suspension")
	// ErrInvalidInput: a tool, command or transition input failed its
	// schema or did not decode.
	ErrInvalidInput = errors.New("instance: invalid input")
	// ErrPanic: a handler panicked; the panic value follows in the message.
	ErrPanic = errors.New("instance: handler panicked")
)

// ErrInvalidEvent reports an event name CheckEvent refuses (empty, too
// long, not UTF-8, or with control characters).
var ErrInvalidEvent = errors.New("instance: invalid event name")

// ErrDuplicateEffect reports a second effect of one name in one handler
// call: the journal tells effects apart by the call's idempotency key and
// the effect's name.
var ErrDuplicateEffect = errors.New("instance: effect name used twice in one call")

// ErrEffectTx reports an effect that cannot run in the store's
// transaction (node.EffectTx): the machine's store runs none (memstore, or
// a machine outside a durable runner), or its transaction is not of the
// type the effect's function takes. Nothing ran.
var ErrEffectTx = errors.New("instance: effect cannot run in a store transaction")

// ErrEffectInDoubt reports an effect whose journal says it started and
// never says it ended, where no person can be asked (a command's effect):
// the call fails rather than run it a second time.
var ErrEffectInDoubt = errors.New("instance: effect in doubt")

// Sentinels of governed suspensions (Policy). A decision refused with one
// of them changes nothing.
var (
	// ErrBadPolicy: a policy no decision could satisfy; the more precise
	// ErrNoApprover, ErrQuorumTooLarge and ErrDelegationCycle wrap it.
	ErrBadPolicy = errors.New("instance: bad policy")
	// ErrNoApprover: a policy naming no subject and no group.
	ErrNoApprover = fmt.Errorf("instance: no approver: %w", ErrBadPolicy)
	// ErrQuorumTooLarge: a quorum larger than the subjects a policy names.
	ErrQuorumTooLarge = fmt.Errorf("instance: quorum larger than the group: %w", ErrBadPolicy)
	// ErrDelegationCycle: delegations that lead back to where they
	// started (or a delegation to oneself, or with an empty side).
	ErrDelegationCycle = fmt.Errorf("instance: delegation cycle: %w", ErrBadPolicy)
	// ErrForbidden: a decision from an identity the policy does not allow.
	ErrForbidden = errors.New("instance: identity may not decide")
	// ErrSeparationOfDuties: a decision from the identity that asked for
	// the call, under Policy.SeparateDuties. It wraps ErrForbidden.
	ErrSeparationOfDuties = fmt.Errorf("instance: separation of duties: %w", ErrForbidden)
	// ErrStaleDecision: a decision naming a digest other than the call's:
	// the decider saw another action.
	ErrStaleDecision = errors.New("instance: decision on a stale digest")
	// ErrAlreadyDecided: a second decision by the same approver.
	ErrAlreadyDecided = errors.New("instance: approver already decided")
	// ErrEditNotAllowed: a decision that edits the call's input where the
	// policy does not allow it (Policy.AllowEdit), or with a refusal. It
	// wraps ErrForbidden.
	ErrEditNotAllowed = fmt.Errorf("instance: edit not allowed: %w", ErrForbidden)
)
