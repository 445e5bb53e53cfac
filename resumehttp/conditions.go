package resumehttp

// This file serves the resume conditions of package durable: signals of
// named events (POST /events/{name}), caller suspend
// (POST /machines/{id}/suspend), and fresh-turn resumes
// (continue_transcript false on POST /suspensions/{id}/resume).

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// Signaler is the optional capability of a [Runner] that serves
// POST /events/{name}.
type Signaler interface {
	// Signal resumes every suspension waiting for event with payload and
	// returns how many it woke.
	Signal(ctx context.Context, event string, payload any) (woken int, err error)
}

// Suspender is the optional capability of a [Runner] that serves
// POST /machines/{id}/suspend.
type Suspender interface {
	// Suspend parks machineID on behalf of the caller.
	Suspend(ctx context.Context, machineID, reason string, opts ...durable.SuspendOption) (durable.Suspension, error)
}

var (
	_ Signaler  = (*durable.Runner)(nil)
	_ Suspender = (*durable.Runner)(nil)
)

// SignalRequest is the optional body of POST /events/{name}.
type SignalRequest struct {
	// Payload is the result every woken suspension gets, any JSON value
	// (as in ResumeRequest). Omitted, they resolve without a payload.
	Payload json.RawMessage `json:"payload,omitempty"`
	// RequestID is ignored by the handler; it tells two otherwise
	// identical signals apart, which would be refused as a replay.
	RequestID string `json:"request_id,omitempty"`
}

// SignalResult is the answer of POST /events/{name}.
type SignalResult struct {
	// Event is the event signalled.
	Event string `json:"event"`
	// Woken is how many suspensions the signal resumed.
	Woken int `json:"woken"`
}

// SuspendRequest is the optional body of POST /machines/{id}/suspend: the
// ACP draft RFC's session/suspend in snake case.
type SuspendRequest struct {
	// Reason is recorded on the suspension.
	Reason string `json:"reason,omitempty"`
	// Mode is finish_step (the default), interrupt_immediate or
	// wait_for_completion (durable.SuspendMode).
	Mode string `json:"mode,omitempty"`
	// ResumeWhen are the conditions besides an explicit resume.
	ResumeWhen *ResumeWhen `json:"resume_when,omitempty"`
	// NoWait answers 202 with applied false as soon as the request is
	// kept, when a run holds the machine, instead of waiting for the run
	// to apply it.
	NoWait bool `json:"no_wait,omitempty"`
	// RequestID is ignored, as in SignalRequest.
	RequestID string `json:"request_id,omitempty"`
}

// ResumeWhen are resume conditions (the RFC's ResumeConditions).
type ResumeWhen struct {
	// OnEvent is the named event that resumes the suspension.
	OnEvent string `json:"on_event,omitempty"`
	// Timeout is the deadline and its fallback.
	Timeout *ResumeTimeout `json:"timeout,omitempty"`
}

// ResumeTimeout is a deadline with its on-timeout action (the RFC's
// ResumeTimeoutSpec).
type ResumeTimeout struct {
	// DurationMinutes is the wait from the suspension to the deadline;
	// positive, at most a year.
	DurationMinutes float64 `json:"duration_minutes"`
	// OnTimeout is fail (the default), resume_with_input or
	// resume_with_summary.
	OnTimeout string `json:"on_timeout,omitempty"`
	// Input is the payload of resume_with_input.
	Input json.RawMessage `json:"input,omitempty"`
}

// SuspendResult is the answer of POST /machines/{id}/suspend (the RFC's
// SessionSuspendResponse).
type SuspendResult struct {
	// Handle is the suspend ID: resume or cancel the suspension with it.
	Handle    string `json:"handle"`
	MachineID string `json:"machine_id"`
	// InstanceID is the instance parked (absent until applied).
	InstanceID string `json:"instance_id,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Mode       string `json:"mode"`
	// Applied is false only in a 202: a run holds the machine and will
	// apply the request at its mode's point.
	Applied     bool        `json:"applied"`
	RequestedAt time.Time   `json:"requested_at"`
	SuspendedAt time.Time   `json:"suspended_at,omitzero"`
	ResumeWhen  *ResumeWhen `json:"resume_when,omitempty"`
	// Deadline is when the suspension times out (ResumeWhen.Timeout
	// from SuspendedAt); absent if never, or not applied yet.
	Deadline time.Time `json:"deadline,omitzero"`
	Summary  string    `json:"summary,omitempty"`
}

// SuspendResultOf returns sus as POST /machines/{id}/suspend answers it;
// markov suspend -o json prints the same.
func SuspendResultOf(sus durable.Suspension) SuspendResult {
	return SuspendResult{
		Handle: sus.ID, MachineID: sus.MachineID, InstanceID: sus.InstanceID, Reason: sus.Reason, Mode: string(sus.Mode),
		Applied: sus.Applied, RequestedAt: sus.RequestedAt, SuspendedAt: sus.SuspendedAt,
		ResumeWhen: resumeWhenOf(sus.Conditions), Deadline: sus.Conditions.Deadline, Summary: sus.Summary,
	}
}

// maxTimeoutMinutes bounds ResumeTimeout.DurationMinutes: a year.
const maxTimeoutMinutes = 366 * 24 * 60

// suspendOptions turns a SuspendRequest into the options of
// durable.Runner.Suspend. A malformed request is an error wrapping
// durable.ErrInvalidSuspend.
func suspendOptions(req SuspendRequest) ([]durable.SuspendOption, error) {
	mode, err := durable.ParseSuspendMode(req.Mode)
	if err != nil {
		return nil, err
	}
	opts := []durable.SuspendOption{durable.WithMode(mode)}
	if req.NoWait {
		opts = append(opts, durable.NoWait())
	}
	cond, err := conditionOptions(req.ResumeWhen)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", durable.ErrInvalidSuspend, err)
	}
	return append(opts, durable.WithConditions(cond...)), nil
}

// conditionOptions turns resume conditions into suspend options.
func conditionOptions(w *ResumeWhen) ([]instance.SuspendOption, error) {
	if w == nil {
		return nil, nil
	}
	c := instance.Conditions{Event: w.OnEvent}
	var input any
	if t := w.Timeout; t != nil {
		if !(t.DurationMinutes > 0 && t.DurationMinutes <= maxTimeoutMinutes) {
			return nil, fmt.Errorf("%w: duration_minutes must be positive and at most %d", instance.ErrInvalidInput, maxTimeoutMinutes)
		}
		c.Timeout = time.Duration(t.DurationMinutes * float64(time.Minute))
		c.OnTimeout = instance.TimeoutKind(t.OnTimeout)
		input = payloadOf(t.Input)
	}
	return c.Options(input)
}

// resumeWhenOf is the echo of conditions, nil when there are none.
func resumeWhenOf(c instance.Conditions) *ResumeWhen {
	if c.IsZero() && c.Timeout == 0 {
		return nil
	}
	w := &ResumeWhen{OnEvent: c.Event}
	if c.Timeout > 0 {
		w.Timeout = &ResumeTimeout{DurationMinutes: c.Timeout.Minutes(), OnTimeout: string(c.OnTimeout)}
	}
	return w
}

func (h *Handler) signal(w http.ResponseWriter, r *http.Request, s Signaler) {
	event := r.PathValue("name")
	if err := instance.CheckEvent(event); err != nil {
		h.writeError(w, r, http.StatusBadRequest, "invalid_event", err.Error())
		return
	}
	var req SignalRequest
	if !h.decode(w, r, &req) {
		return
	}
	woken, err := s.Signal(runContext(r), event, payloadOf(req.Payload))
	if err != nil {
		h.fail(w, r, err, slog.String("op", "signal"), slog.String("event", event), slog.Int("woken", woken))
		return
	}
	h.writeJSON(w, r, http.StatusOK, SignalResult{Event: event, Woken: woken},
		slog.String("op", "signal"), slog.String("event", event), slog.Int("woken", woken))
}

func (h *Handler) suspend(w http.ResponseWriter, r *http.Request, s Suspender) {
	id, req, ok := machineRequest[SuspendRequest](h, w, r)
	if !ok {
		return
	}
	opts, err := suspendOptions(req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sus, err := s.Suspend(r.Context(), id, req.Reason, opts...)
	if err != nil {
		h.fail(w, r, err, slog.String("op", "suspend"), slog.String("machine", id))
		return
	}
	status := http.StatusOK
	if !sus.Applied {
		status = http.StatusAccepted
	}
	h.writeJSON(w, r, status, SuspendResultOf(sus), slog.String("op", "suspend"), slog.String("machine", id), slog.String("suspend_id", sus.ID), slog.Bool("applied", sus.Applied))
}

// resumeRun checks in the resume req asks for (a fresh turn with
// continue_transcript false) and returns its run.
func (h *Handler) resumeRun(ctx context.Context, id string, req ResumeRequest) (*durable.Run, error) {
	return h.runner.Resume(ctx, resumeInput(id, req))
}

// resumeInput is the resume of suspension id that req asks for.
func resumeInput(id string, req ResumeRequest) machine.ResumeInput {
	return machine.ResumeInput{SuspendID: id, Payload: payloadOf(req.Payload), IsError: req.IsError,
		FreshTurn: req.ContinueTranscript != nil && !*req.ContinueTranscript,
		By:        req.By, Groups: req.Groups, Digest: req.Digest, Deny: req.Deny, Edit: payloadOf(req.Edit)}
}

// cancelInput is the cancellation of suspension id that req asks for.
func cancelInput(id string, req CancelRequest) machine.CancelInput {
	return machine.CancelInput{SuspendID: id, Reason: req.Reason, By: req.By, Groups: req.Groups}
}
