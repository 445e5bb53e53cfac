package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/markov-agents/markov/internal/errtext"
)

// The draft RFC's verbs (session/suspend, session/await_resumption, the
// enriched session/resume, the suspended and resumed session updates) are
// not in the ACP schema the SDK implements, so they travel as ACP
// extension methods: the RFC's method name with a leading underscore, and
// the RFC's params and results unchanged. docs/ACP.md shows every message.
const (
	// MethodSuspend is session/suspend, client to agent (a request).
	MethodSuspend = "_session/suspend"
	// MethodResume is the RFC's session/resume, client to agent (a
	// request), with input and continueTranscript. The standard
	// session/resume is served too; it reads them from its _meta.
	MethodResume = "_session/resume"
	// MethodAwaitResumption is session/await_resumption, agent to client
	// (a request), sent when a node or tool parks itself.
	MethodAwaitResumption = "_session/await_resumption"
	// MethodUpdate carries the suspended and resumed session updates,
	// agent to client (a notification), in the shape of session/update.
	MethodUpdate = "_session/update"
)

// Suspend modes of a SuspendRequest.
const (
	// ModeFinishStep commits at the next step boundary (the default).
	ModeFinishStep = "finish_step"
	// ModeInterruptImmediate suspends before the next tool call
	// dispatches.
	ModeInterruptImmediate = "interrupt_immediate"
	// ModeWaitForCompletion lets the in-flight turn fully resolve first.
	ModeWaitForCompletion = "wait_for_completion"
)

// On-timeout actions of a ResumeTimeoutSpec.
const (
	OnTimeoutFail              = "fail"
	OnTimeoutResumeWithInput   = "resume_with_input"
	OnTimeoutResumeWithSummary = "resume_with_summary"
)

// Causes of a ResumedUpdate.
const (
	CauseExplicitResume = "explicit_resume"
	CauseConditionFired = "condition_fired"
	CauseTimeout        = "timeout"
	CauseExternalEvent  = "external_event"
)

// Initiators of a SuspendedUpdate.
const (
	InitiatorClient = "client"
	InitiatorAgent  = "agent"
)

// Session update discriminators of MethodUpdate.
const (
	UpdateSuspended = "suspended"
	UpdateResumed   = "resumed"
)

// MaxTimeoutMinutes bounds ResumeTimeoutSpec.DurationMinutes: ten years.
const MaxTimeoutMinutes = 10 * 366 * 24 * 60

// ResumeConditions are what a suspension waits for besides an explicit
// resume (the RFC's ResumeConditions).
type ResumeConditions struct {
	// OnEvent is a named event ("ci.passed") whose signal resumes it.
	OnEvent string `json:"onEvent,omitempty"`
	// Trigger is a host-defined event matcher. This agent understands the
	// form {"event": NAME}, the same as OnEvent; any other is refused.
	Trigger map[string]any `json:"trigger,omitempty"`
	// Timeout is a deadline and what happens when it passes.
	Timeout *ResumeTimeoutSpec `json:"timeout,omitempty"`
}

// ResumeTimeoutSpec is a deadline in minutes from the suspension and its
// fallback.
type ResumeTimeoutSpec struct {
	DurationMinutes float64 `json:"durationMinutes"`
	// OnTimeout is fail (the default), resume_with_input or
	// resume_with_summary.
	OnTimeout string `json:"onTimeout,omitempty"`
	// Input is the payload of resume_with_input (an extension of the RFC,
	// which names the action but not its input): absent means null.
	Input json.RawMessage `json:"input,omitempty"`
}

// SuspendRequest is the params of session/suspend.
type SuspendRequest struct {
	SessionID  string            `json:"sessionId"`
	Reason     string            `json:"reason,omitempty"`
	ResumeWhen *ResumeConditions `json:"resumeWhen,omitempty"`
	Mode       string            `json:"mode,omitempty"`
	Meta       map[string]any    `json:"_meta,omitempty"`
}

// SuspendResponse is the result of session/suspend.
type SuspendResponse struct {
	Handle      string            `json:"handle"`
	Reason      string            `json:"reason,omitempty"`
	SuspendedAt string            `json:"suspendedAt"`
	ResumeWhen  *ResumeConditions `json:"resumeWhen,omitempty"`
	Summary     string            `json:"summary,omitempty"`
	Meta        map[string]any    `json:"_meta,omitempty"`
}

// AwaitResumptionRequest is the params of session/await_resumption; _meta
// carries the handle ({"handle": ...}), which the RFC's request lacks.
type AwaitResumptionRequest struct {
	SessionID  string            `json:"sessionId"`
	Reason     string            `json:"reason"`
	Conditions *ResumeConditions `json:"conditions,omitempty"`
	Summary    string            `json:"summary,omitempty"`
	Meta       map[string]any    `json:"_meta,omitempty"`
}

// AwaitResumptionResponse is the client's answer to
// session/await_resumption: it echoes the handle.
type AwaitResumptionResponse struct {
	Handle      string         `json:"handle"`
	SuspendedAt string         `json:"suspendedAt"`
	Meta        map[string]any `json:"_meta,omitempty"`
}

// ResumeRequest is the params of the RFC's session/resume.
type ResumeRequest struct {
	SessionID string `json:"sessionId"`
	// Handle names the suspension to resume (an extension of the RFC):
	// empty resumes the session's most recent park.
	Handle string `json:"handle,omitempty"`
	// Input is fed back to the suspension; absent means none.
	Input json.RawMessage `json:"input,omitempty"`
	// ContinueTranscript, when false, resumes in a fresh turn that sees a
	// digest of the transcript before the suspension. Absent means true.
	ContinueTranscript *bool          `json:"continueTranscript,omitempty"`
	Meta               map[string]any `json:"_meta,omitempty"`
}

// ResumeResponse is the result of the RFC's session/resume: how the
// resumed run stopped.
type ResumeResponse struct {
	Handle     string            `json:"handle"`
	StopReason acpsdk.StopReason `json:"stopReason"`
	Meta       map[string]any    `json:"_meta,omitempty"`
}

// SessionUpdateNotification is the params of MethodUpdate: a session
// update the ACP schema does not have yet.
type SessionUpdateNotification struct {
	SessionID string `json:"sessionId"`
	Update    any    `json:"update"`
}

// SuspendedUpdate is the suspended session update.
type SuspendedUpdate struct {
	SessionUpdate string            `json:"sessionUpdate"`
	Handle        string            `json:"handle"`
	Reason        string            `json:"reason,omitempty"`
	Initiator     string            `json:"initiator"`
	SuspendedAt   string            `json:"suspendedAt"`
	ResumeWhen    *ResumeConditions `json:"resumeWhen,omitempty"`
	Meta          map[string]any    `json:"_meta,omitempty"`
}

// ResumedUpdate is the resumed session update.
type ResumedUpdate struct {
	SessionUpdate      string         `json:"sessionUpdate"`
	Handle             string         `json:"handle"`
	Cause              string         `json:"cause"`
	HadResumeInput     bool           `json:"hadResumeInput"`
	ContinueTranscript bool           `json:"continueTranscript"`
	ResumedAt          string         `json:"resumedAt"`
	Meta               map[string]any `json:"_meta,omitempty"`
}

// wireTime is the RFC's ISO-8601 time.
func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// decodeStrict decodes params into v: one JSON object, nothing after it.
func decodeStrict(params json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(params))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the params", ErrInvalidParams)
	}
	return nil
}

// DecodeSuspendRequest decodes and checks the params of session/suspend:
// a session ID, a known mode, and conditions Check accepts. An error
// wraps ErrInvalidParams.
func DecodeSuspendRequest(params json.RawMessage) (SuspendRequest, error) {
	var r SuspendRequest
	if err := decodeStrict(params, &r); err != nil {
		return SuspendRequest{}, err
	}
	if r.SessionID == "" {
		return SuspendRequest{}, fmt.Errorf("%w: sessionId is required", ErrInvalidParams)
	}
	mode, err := errtext.OneOf(ErrInvalidParams, "mode", r.Mode, ModeFinishStep, ModeFinishStep, ModeInterruptImmediate, ModeWaitForCompletion)
	if err != nil {
		return SuspendRequest{}, err
	}
	r.Mode = mode
	if err := r.ResumeWhen.Check(); err != nil {
		return SuspendRequest{}, err
	}
	return r, nil
}

// DecodeResumeRequest decodes and checks the params of the RFC's
// session/resume. An error wraps ErrInvalidParams.
func DecodeResumeRequest(params json.RawMessage) (ResumeRequest, error) {
	var r ResumeRequest
	if err := decodeStrict(params, &r); err != nil {
		return ResumeRequest{}, err
	}
	if r.SessionID == "" {
		return ResumeRequest{}, fmt.Errorf("%w: sessionId is required", ErrInvalidParams)
	}
	return r, nil
}

// Check reports whether the conditions are ones this agent honours: an
// event name, a trigger of the form {"event": NAME}, a timeout of more
// than zero and at most MaxTimeoutMinutes minutes with a known action.
// A nil c is no condition. An error wraps ErrInvalidParams.
func (c *ResumeConditions) Check() error {
	if c == nil {
		return nil
	}
	if _, err := c.event(); err != nil {
		return err
	}
	t := c.Timeout
	if t == nil {
		return nil
	}
	if math.IsNaN(t.DurationMinutes) || t.DurationMinutes <= 0 || t.DurationMinutes > MaxTimeoutMinutes {
		return fmt.Errorf("%w: timeout.durationMinutes must be more than 0 and at most %d", ErrInvalidParams, MaxTimeoutMinutes)
	}
	if _, err := errtext.OneOf(ErrInvalidParams, "timeout.onTimeout", t.OnTimeout, OnTimeoutFail, OnTimeoutFail, OnTimeoutResumeWithInput, OnTimeoutResumeWithSummary); err != nil {
		return err
	}
	if len(t.Input) > 0 && t.OnTimeout != OnTimeoutResumeWithInput {
		return fmt.Errorf("%w: timeout.input needs onTimeout resume_with_input", ErrInvalidParams)
	}
	return nil
}

// event is the event the conditions wait for: OnEvent, or the trigger's.
func (c *ResumeConditions) event() (string, error) {
	if c.Trigger == nil {
		return c.OnEvent, nil
	}
	name, ok := c.Trigger["event"].(string)
	if !ok || len(c.Trigger) != 1 {
		return "", fmt.Errorf("%w: trigger must be {\"event\": NAME}", ErrInvalidParams)
	}
	if c.OnEvent != "" && c.OnEvent != name {
		return "", fmt.Errorf("%w: onEvent %q and trigger event %q differ", ErrInvalidParams, errtext.Clip(c.OnEvent, 64), errtext.Clip(name, 64))
	}
	return name, nil
}
