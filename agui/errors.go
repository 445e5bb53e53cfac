package agui

import "errors"

var (
	// ErrInvalidConfig reports a Config New cannot build a Handler from.
	ErrInvalidConfig = errors.New("agui: invalid config")
	// ErrInvalidInput reports a RunAgentInput that cannot be run: not
	// JSON, a missing or invalid threadId or runId, a resume entry with
	// an unknown status. Its RUN_ERROR code is "invalid_input".
	ErrInvalidInput = errors.New("agui: invalid RunAgentInput")
	// ErrUnknownInterrupt reports a resume entry naming no interrupt of
	// the thread (code "unknown_interrupt").
	ErrUnknownInterrupt = errors.New("agui: unknown interrupt")
	// ErrInterruptResolved reports a resume entry for an interrupt that
	// was already answered (code "interrupt_resolved").
	ErrInterruptResolved = errors.New("agui: interrupt already resolved")
	// ErrInterruptCancelled reports a resume entry for an interrupt that
	// was cancelled (code "interrupt_cancelled").
	ErrInterruptCancelled = errors.New("agui: interrupt cancelled")
	// ErrInterruptExpired reports a resume entry for an interrupt past
	// its deadline (code "interrupt_expired").
	ErrInterruptExpired = errors.New("agui: interrupt expired")
	// ErrInvalidPayload reports a resume payload its interrupt's
	// responseSchema refuses (code "invalid_payload").
	ErrInvalidPayload = errors.New("agui: resume payload refused")
	// ErrRunInProgress reports an input for a thread whose run is still
	// going (code "run_in_progress"): reconnect to it instead.
	ErrRunInProgress = errors.New("agui: a run of this thread is in progress")
)
