package durable

// This file is caller-initiated suspend across processes: Runner.Suspend
// parks a machine at once when no run holds it, and otherwise keeps a
// request in the store that the run holding the machine applies at the
// point the request's mode names.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/errtext"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
)

// SuspendMode says when a caller's suspend request (Runner.Suspend) for a
// machine that a run holds takes effect. The names are the ACP draft
// RFC's. A machine no run holds is suspended at once, whatever the mode.
type SuspendMode string

// The suspend modes.
const (
	// FinishStep (the default): at the next step boundary — once the
	// round in flight (a model call and its tools) is done and saved.
	FinishStep SuspendMode = "finish_step"
	// InterruptImmediate: before the next tool call dispatches — at the
	// checkpoint between a model reply and its tools (the reply is kept
	// and its tools run after the resume, with no second model call), or
	// at the next step boundary, whichever comes first.
	InterruptImmediate SuspendMode = "interrupt_immediate"
	// WaitForCompletion: once the in-flight turn fully resolves — when
	// the run ends, nothing left to do.
	WaitForCompletion SuspendMode = "wait_for_completion"
)

// ParseSuspendMode returns the mode named s (empty: FinishStep), or an
// error wrapping ErrInvalidSuspend.
func ParseSuspendMode(s string) (SuspendMode, error) {
	return errtext.OneOf(ErrInvalidSuspend, "mode", s, FinishStep, FinishStep, InterruptImmediate, WaitForCompletion)
}

// SuspendOption configures Runner.Suspend.
type SuspendOption func(*suspendRequest) error

// WithMode sets when the suspension applies to a running machine
// (FinishStep if not given). An unknown mode fails with
// ErrInvalidSuspend.
func WithMode(m SuspendMode) SuspendOption {
	return func(r *suspendRequest) error {
		m, err := ParseSuspendMode(string(m))
		r.body.Mode = m
		return err
	}
}

// WithConditions sets the suspension's resume conditions and details, as
// the options of a tool's Suspend do: instance.WithEvent,
// instance.WithTimeout or instance.WithDeadline with
// instance.OnTimeoutResume, instance.OnTimeoutSummary or
// instance.OnTimeoutFail, instance.WithMetadata, instance.WithID. A
// timeout counts from when the suspension is applied (the RFC's
// "durationMinutes from suspend commit").
func WithConditions(opts ...instance.SuspendOption) SuspendOption {
	return func(r *suspendRequest) error {
		r.opts = append(r.opts, opts...)
		return nil
	}
}

// NoWait makes Suspend return as soon as the request is kept when a run
// holds the machine, instead of waiting for the run to apply it: the
// answer then has Applied false and no SuspendedAt.
func NoWait() SuspendOption {
	return func(r *suspendRequest) error {
		r.noWait = true
		return nil
	}
}

// Suspension is the answer of Runner.Suspend: the RFC's
// SessionSuspendResponse.
type Suspension struct {
	// ID is the handle: the suspend ID of the whole-instance suspension,
	// to resume it with (Runner.Resume, ResumeWith) or cancel it.
	ID string
	// MachineID is the machine suspended.
	MachineID string
	// InstanceID is the instance parked (the primary leaf); empty until
	// applied.
	InstanceID string
	// Reason is the reason given.
	Reason string
	// Mode is the mode of the request.
	Mode SuspendMode
	// Applied reports that the suspension is committed (saved). False
	// only with NoWait, or when ctx ended while waiting: the request is
	// kept and the run holding the machine applies it at its mode's point.
	Applied bool
	// RequestedAt is when Suspend was called; SuspendedAt when the
	// suspension was committed (zero unless Applied).
	RequestedAt, SuspendedAt time.Time
	// Conditions echo what the suspension waits for besides an explicit
	// resume (event, deadline, on-timeout action).
	Conditions instance.Conditions
	// Summary is a short digest for a UI ("paused review after 12
	// messages; waiting for ci.passed, or a resume; …").
	Summary string
}

// requestBody is a suspend request as kept in the store (JSON).
type requestBody struct {
	Reason    string          `json:"reason,omitempty"`
	Mode      SuspendMode     `json:"mode,omitempty"`
	Event     string          `json:"event,omitempty"`
	Timeout   time.Duration   `json:"timeout,omitempty"`
	Deadline  time.Time       `json:"deadline,omitzero"`
	Resume    bool            `json:"on_timeout_resume,omitempty"`
	Payload   json.RawMessage `json:"on_timeout_payload,omitempty"`
	IsError   bool            `json:"on_timeout_is_error,omitempty"`
	Summarize bool            `json:"on_timeout_summary,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	At        time.Time       `json:"at"`
}

// suspendRequest is a Suspend call being built.
type suspendRequest struct {
	id     string
	body   requestBody
	opts   []instance.SuspendOption
	noWait bool
}

// newSuspendRequest checks Suspend's arguments and builds its request.
func (r *Runner) newSuspendRequest(reason string, opts []SuspendOption) (*suspendRequest, error) {
	req := &suspendRequest{body: requestBody{Reason: reason, Mode: FinishStep, At: r.charter.Now().UTC()}}
	for _, o := range opts {
		if err := o(req); err != nil {
			return nil, err
		}
	}
	err := instance.NewSuspendRequest(reason, req.opts...)
	sr, ok := err.(*instance.SuspendRequest)
	if !ok {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSuspend, err)
	}
	req.id = sr.ID
	if req.id == "" {
		req.id = instance.NewID("")
	}
	if !store.ValidID(req.id) {
		return nil, fmt.Errorf("%w: suspend ID %q is not a valid ID", ErrInvalidSuspend, req.id)
	}
	b := &req.body
	b.Event, b.Timeout, b.Deadline, b.Metadata = sr.Event, sr.Timeout, sr.Deadline, sr.Metadata
	b.Resume, b.Payload, b.IsError, b.Summarize = sr.OnTimeout.Resume, sr.OnTimeout.Payload, sr.OnTimeout.IsError, sr.OnTimeout.Summarize
	return req, nil
}

// options turns a kept request back into the options of Machine.Suspend.
func (b *requestBody) options(id string) []instance.SuspendOption {
	opts := []instance.SuspendOption{instance.WithID(id)}
	if len(b.Metadata) > 0 {
		opts = append(opts, instance.WithMetadata(b.Metadata))
	}
	if b.Event != "" {
		opts = append(opts, instance.WithEvent(b.Event))
	}
	if !b.Deadline.IsZero() {
		opts = append(opts, instance.WithDeadline(b.Deadline))
	} else if b.Timeout > 0 {
		opts = append(opts, instance.WithTimeout(b.Timeout))
	}
	switch {
	case b.Resume:
		opts = append(opts, instance.OnTimeoutResume(b.Payload, b.IsError))
	case b.Summarize:
		opts = append(opts, instance.OnTimeoutSummary())
	}
	return opts
}

// pending is the answer for a request kept and not applied yet.
func (req *suspendRequest) pending(machineID string) Suspension {
	b := req.body
	c := instance.SuspendedCall{Event: b.Event, Deadline: b.Deadline,
		OnTimeout: instance.TimeoutAction{Resume: b.Resume, Summarize: b.Summarize}}
	cond := c.Conditions()
	if cond.Deadline.IsZero() && b.Timeout > 0 {
		cond.Timeout, cond.OnTimeout = b.Timeout, c.OnTimeout.Kind()
	}
	return Suspension{ID: req.id, MachineID: machineID, Reason: b.Reason, Mode: b.Mode, RequestedAt: b.At, Conditions: cond,
		Summary: "suspend requested (" + string(b.Mode) + "); the run in progress applies it"}
}

// Suspend parks machineID's primary leaf on behalf of a caller (the
// ACP draft RFC's session/suspend): a whole-instance suspension, initiator
// instance.ByCaller, with reason and the resume conditions of
// WithConditions, resumed by its ID (the returned handle) like any other
// — or by a Signal of its event, or its deadline.
//
// A machine no run holds is suspended at once (whatever the mode): held,
// loaded, parked and saved. For a machine a run holds — in this process
// or another — the request is kept in the store (a store.SuspendRequester;
// otherwise ErrUnsupported) and the run applies it at the point its mode
// (WithMode) names; Suspend then waits for that run to end and returns
// the applied suspension, unless NoWait (or ctx ends first: the request
// stays kept, Applied is false, and the error is ctx's). A run that
// starts while a request is kept applies it before anything else.
//
// A machine with no primary leaf fails with machine.ErrNoPrimary, an
// unknown machine with store.ErrNotFound, bad options with
// ErrInvalidSuspend (instance.ErrInvalidEvent, …); none changes anything.
func (r *Runner) Suspend(ctx context.Context, machineID, reason string, opts ...SuspendOption) (Suspension, error) {
	req, err := r.newSuspendRequest(reason, opts)
	if err != nil {
		return Suspension{}, err
	}
	h, ok, err := r.TryHold(ctx, machineID)
	if err != nil {
		return Suspension{}, fmt.Errorf("suspend machine %s: %w", machineID, err)
	}
	if ok {
		defer h.Release()
		return h.suspend(ctx, req)
	}
	rq, isRequester := r.store.(store.SuspendRequester)
	if !isRequester {
		return Suspension{}, fmt.Errorf("suspend running machine %s: %w", machineID, ErrUnsupported)
	}
	body, err := json.Marshal(req.body)
	if err != nil {
		return Suspension{}, fmt.Errorf("suspend machine %s: %w", machineID, err)
	}
	if err := rq.AddSuspendRequest(ctx, store.SuspendRequest{ID: req.id, MachineID: machineID, Body: body}); err != nil {
		return Suspension{}, fmt.Errorf("suspend machine %s: %w", machineID, err)
	}
	if req.noWait {
		return req.pending(machineID), nil
	}
	h, err = r.Hold(ctx, machineID)
	if err != nil {
		return req.pending(machineID), fmt.Errorf("suspend machine %s: wait for the run: %w", machineID, err)
	}
	defer h.Release()
	return h.suspend(ctx, req)
}

// suspend applies req under the hold, unless a run applied it already,
// and answers with the suspension.
func (h *Hold) suspend(ctx context.Context, req *suspendRequest) (Suspension, error) {
	s, err := h.r.loadHeld(ctx, h.id)
	if err != nil {
		return Suspension{}, err
	}
	if _, c := s.findCall(req.id); c == nil {
		err := s.recording(func() error {
			if err := s.park(ctx, req.id, req.body); err != nil {
				return err
			}
			return s.save(ctx)
		})
		if err != nil {
			return Suspension{}, err
		}
		s.dropRequest(ctx, req.id)
	}
	return s.answer(req)
}

// findCall returns the call id of the session's machine and its
// instance, pending or not, as the tree or the index records it.
func (s *session) findCall(id string) (string, *instance.SuspendedCall) {
	for _, c := range s.m.Pending() {
		if c.SuspendID == id {
			return c.InstanceID, &c
		}
	}
	for _, e := range s.indexed {
		if e.ID == id {
			return "", &instance.SuspendedCall{SuspendID: id, Reason: e.Reason, Event: e.Event, Deadline: e.Deadline, SuspendedAt: e.CreatedAt, Status: instance.Status(e.Status)}
		}
	}
	return "", nil
}

// answer builds the answer of an applied request.
func (s *session) answer(req *suspendRequest) (Suspension, error) {
	inst, c := s.findCall(req.id)
	if c == nil {
		return Suspension{}, fmt.Errorf("suspension %s: %w", req.id, instance.ErrUnknownSuspendID)
	}
	return Suspension{
		ID: req.id, MachineID: s.id, InstanceID: inst, Reason: req.body.Reason, Mode: req.body.Mode, Applied: true,
		RequestedAt: req.body.At, SuspendedAt: c.SuspendedAt, Conditions: c.Conditions(), Summary: summarize(s.m, c, s.from),
	}, nil
}

// park applies a request: the primary leaf is suspended, and its
// suspended event recorded for the save that follows (the event log's
// watchers see the caller suspension).
func (s *session) park(ctx context.Context, id string, b requestBody) error {
	if _, err := s.m.Suspend(b.Reason, b.options(id)...); err != nil {
		return fmt.Errorf("suspend machine %s: %w", s.id, err)
	}
	if _, c := s.findCall(id); c != nil {
		ev := parkEvent(*c)
		s.rec.add(ctx, suspendedEvent(ev, c), s.rev)
	}
	return nil
}

// recording runs fn with a recorder for what it records, when no run
// records the session's events (a caller suspension of a machine no run
// holds, or one applied as a run loads the machine).
func (s *session) recording(fn func() error) error {
	if s.rec != nil {
		return fn()
	}
	s.rec = s.r.newRecorder(s.id)
	defer func() {
		s.rec.close()
		s.rec = nil
	}()
	return fn()
}

// parkEvent is the lifecycle event of caller suspension c.
func parkEvent(c instance.SuspendedCall) instance.Event {
	return instance.Event{Type: instance.EventSuspended, SuspendID: c.SuspendID, InstanceID: c.InstanceID,
		Kind: c.Kind, Initiator: c.Initiator, Reason: c.Reason, At: c.SuspendedAt}
}

// suspendedEvent is the machine event of suspension event ev of call c
// (nil: unknown).
func suspendedEvent(ev instance.Event, c *instance.SuspendedCall) machine.Event {
	return machine.Event{Kind: machine.EventSuspended, InstanceID: ev.InstanceID, Lifecycle: &ev, Call: c}
}

// boundary is a point of a run where kept suspend requests may apply.
type boundary int

const (
	// atReply: a model reply is saved and its tools have not run.
	atReply boundary = iota
	// atStep: a step is saved and the run goes on.
	atStep
	// atLoad: the machine is loaded, or the run ended; everything applies.
	atLoad
)

// applies reports whether a request of mode m applies at b.
func (b boundary) applies(m SuspendMode) bool {
	switch b {
	case atReply:
		return m == InterruptImmediate
	case atStep:
		return m != WaitForCompletion
	}
	return true
}

// applyRequests applies the kept suspend requests of the machine that
// apply at b, saves, drops them, and returns the suspensions it made. A
// request that cannot apply (no primary leaf, a bad body) is dropped and
// logged; one applied before (its ID is known) is dropped. With a
// store.RequestReporter it reads the requests only if the last load or
// save saw some: one kept since is read at the next boundary that
// follows a save (every run ends with one), as if it came a moment later.
func (s *session) applyRequests(ctx context.Context, b boundary) ([]instance.SuspendedCall, error) {
	rq, ok := s.r.store.(store.SuspendRequester)
	if !ok {
		return nil, nil
	}
	if _, reports := rq.(store.RequestReporter); reports && !s.requests {
		return nil, nil
	}
	reqs, err := rq.SuspendRequests(ctx, s.id)
	if err != nil || len(reqs) == 0 {
		return nil, err
	}
	var applied, drop []string
	err = s.recording(func() error {
		if applied, drop = s.parkRequests(ctx, b, reqs); len(applied) > 0 {
			return s.save(ctx)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var calls []instance.SuspendedCall
	for _, id := range applied {
		if _, c := s.findCall(id); c != nil {
			calls = append(calls, *c)
		}
	}
	for _, id := range append(drop, applied...) {
		s.dropRequest(ctx, id)
	}
	return calls, nil
}

// parkRequests parks the machine for each request of reqs that applies
// at b: it returns those it parked and those to drop (applied before,
// or unable to apply).
func (s *session) parkRequests(ctx context.Context, b boundary, reqs []store.SuspendRequest) (applied, drop []string) {
	for _, q := range reqs {
		var body requestBody
		if _, c := s.findCall(q.ID); c != nil {
			drop = append(drop, q.ID)
			continue
		}
		if err := json.Unmarshal(q.Body, &body); err != nil || !b.applies(body.Mode) {
			if err != nil {
				s.r.log.LogAttrs(ctx, slog.LevelError, "suspend request dropped", slog.String("machine", s.id), slog.String("error", err.Error()))
				drop = append(drop, q.ID)
			}
			continue
		}
		if err := s.park(ctx, q.ID, body); err != nil {
			s.r.log.LogAttrs(ctx, slog.LevelWarn, "suspend request dropped", slog.String("machine", s.id), slog.String("error", err.Error()))
			drop = append(drop, q.ID)
			continue
		}
		applied = append(applied, q.ID)
	}
	return applied, drop
}

// dropRequest removes a request that was applied or cannot be; a failure
// is logged (the request is recognised as applied next time).
func (s *session) dropRequest(ctx context.Context, id string) {
	rq, ok := s.r.store.(store.SuspendRequester)
	if !ok {
		return
	}
	if err := rq.DropSuspendRequest(ctx, s.id, id); err != nil {
		s.r.log.LogAttrs(ctx, slog.LevelWarn, "drop suspend request", slog.String("machine", s.id), slog.String("request", id), slog.String("error", err.Error()))
	}
}

// noteParked adds what requests applied at a step's boundary did to the
// step: the suspension events, the pending calls, the tree.
func (s *session) noteParked(st *machine.Step) {
	if len(s.parked) == 0 {
		return
	}
	calls := s.parked
	s.parked = nil
	for _, c := range calls {
		st.Events = append(st.Events, parkEvent(c))
	}
	st.Suspensions = s.m.Pending()
	st.Root = s.m.Root()
}

// summarize is the Summary of a caller suspension c of m, whose history
// follows earlier entries the run did not load (session.from).
func summarize(m *machine.Machine, c *instance.SuspendedCall, earlier int) string {
	var b strings.Builder
	node, msgs, last := "", earlier, ""
	access.MachineView(m, func(root *instance.Instance, h message.History) {
		if in := root.Find(c.InstanceID); in != nil {
			node = in.Node
		}
		history := h.Messages()
		for i := range history {
			if history[i].Role != message.Record {
				msgs++
			}
		}
		last = lastText(history)
	})
	fmt.Fprintf(&b, "paused %s after %d messages", cmp.Or(node, "the machine"), msgs)
	if last != "" {
		if len(last) > 120 {
			last = strings.ToValidUTF8(last[:120], "") + "…"
		}
		fmt.Fprintf(&b, "; last reply: %q", last)
	}
	b.WriteString("; waiting for a resume")
	cond := c.Conditions()
	if cond.Event != "" {
		fmt.Fprintf(&b, " or the event %q", cond.Event)
	}
	if !cond.Deadline.IsZero() {
		fmt.Fprintf(&b, "; at %s: %s", cond.Deadline.UTC().Format(time.RFC3339), cond.OnTimeout)
	}
	return b.String()
}

// boundaryOf is the boundary a saved step of a run is.
func boundaryOf(st machine.Step) boundary {
	switch {
	case st.Reason == machine.Replied:
		return atReply
	case st.Done:
		return atLoad
	}
	return atStep
}
