package acp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// suspendOrder is a client suspend waiting for the session's run in
// flight to reach the point its mode names.
type suspendOrder struct {
	req  SuspendRequest
	done chan suspendResult
}

type suspendResult struct {
	resp SuspendResponse
	err  error
}

// due returns the session's order if step st is where it commits, taking
// it: interrupt_immediate at any step, a checkpoint included (the
// model's replies saved, their tools not run), finish_step at the next
// full step, wait_for_completion at the last step.
func (s *session) due(st *machine.Step) *suspendOrder {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.order
	if o == nil {
		return nil
	}
	switch o.req.Mode {
	case ModeWaitForCompletion:
		if !st.Done {
			return nil
		}
	case ModeFinishStep:
		if st.Reason == machine.Replied {
			return nil
		}
	}
	s.order = nil
	return o
}

// commit suspends the session for order o, now that its run is at a
// step boundary, and answers the waiting session/suspend.
func (c *conn) commit(ctx context.Context, s *session, o *suspendOrder) error {
	resp, err := c.suspendNow(ctx, s, o.req)
	o.done <- suspendResult{resp, err}
	return err
}

// commitOrder commits an order left when the run ended.
func (c *conn) commitOrder(ctx context.Context, s *session) error {
	s.mu.Lock()
	o := s.order
	s.order = nil
	s.mu.Unlock()
	if o == nil {
		return nil
	}
	return c.commit(ctx, s, o)
}

// suspend serves session/suspend: at once when the session runs nothing,
// otherwise when its run reaches the point the mode names.
func (c *conn) suspend(ctx context.Context, s *session, req SuspendRequest) (SuspendResponse, error) {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return c.suspendNow(ctx, s, req)
	}
	if s.order != nil {
		s.mu.Unlock()
		return SuspendResponse{}, fmt.Errorf("%w: a suspend of session %s is already waiting", ErrBusy, s.id)
	}
	o := &suspendOrder{req: req, done: make(chan suspendResult, 1)}
	s.order = o
	s.mu.Unlock()
	select {
	case r := <-o.done:
		return r.resp, r.err
	case <-ctx.Done():
		s.mu.Lock()
		if s.order == o {
			s.order = nil
		}
		s.mu.Unlock()
		return SuspendResponse{}, ctx.Err()
	}
}

// suspendNow parks the idle session's primary leaf with the request's
// reason and conditions, announces it and answers.
func (c *conn) suspendNow(ctx context.Context, s *session, req SuspendRequest) (SuspendResponse, error) {
	opts, err := suspendOptions(req.ResumeWhen)
	if err != nil {
		return SuspendResponse{}, err
	}
	call, err := c.suspendMachine(ctx, s.id, req.Reason, opts)
	if err != nil {
		return SuspendResponse{}, err
	}
	if err := c.announce(ctx, s, call, true); err != nil {
		return SuspendResponse{}, err
	}
	c.watch(s)
	return SuspendResponse{
		Handle:      call.SuspendID,
		Reason:      call.Reason,
		SuspendedAt: wireTime(call.SuspendedAt),
		ResumeWhen:  conditionsOf(call),
		Summary:     fmt.Sprintf("paused (%s): %s", req.Mode, call.Reason),
		Meta:        map[string]any{"mode": req.Mode},
	}, nil
}

// resume serves session/resume: it resolves the park named by the
// handle (or the latest) with the input, and runs the session on,
// streaming it.
func (c *conn) resume(ctx context.Context, s *session, req ResumeRequest, rfc bool) (ResumeResponse, error) {
	handle := req.Handle
	if handle == "" {
		call, ok := s.latestPark()
		if !ok {
			return ResumeResponse{}, fmt.Errorf("%w: session %s has no park to resume", ErrNotSuspended, s.id)
		}
		handle = call.SuspendID
	}
	sus, err := c.a.cfg.Runner.Suspension(ctx, handle)
	if err != nil {
		return ResumeResponse{}, err
	}
	if sus.MachineID != s.id {
		return ResumeResponse{}, fmt.Errorf("%w: %s is not a suspension of session %s", ErrNotSuspended, handle, s.id)
	}
	var payload any
	if len(req.Input) > 0 {
		payload = json.RawMessage(req.Input)
	}
	c.mu.Lock()
	by := "acp:" + c.client
	c.mu.Unlock()
	in := resumeInput(machine.ResumeInput{SuspendID: handle, Payload: payload, By: by}, req.ContinueTranscript == nil || *req.ContinueTranscript)
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return ResumeResponse{}, err
	}
	defer done()
	stop, err := c.drive(ctx, s, in)
	if err != nil {
		return ResumeResponse{}, err
	}
	_ = rfc
	return ResumeResponse{Handle: handle, StopReason: stop}, nil
}

// suspendOptions are the suspend options of resume conditions.
func suspendOptions(rc *ResumeConditions) ([]instance.SuspendOption, error) {
	if rc == nil {
		return nil, nil
	}
	return conditionOptions(rc)
}
