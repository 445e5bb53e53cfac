package acp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// suspend serves session/suspend: it parks the session's primary leaf
// for the client, at once when no run holds it, otherwise where the mode
// says (durable.Runner.Suspend), and announces the park.
func (c *conn) suspend(ctx context.Context, s *session, req SuspendRequest) (SuspendResponse, error) {
	sus, err := c.suspendMachine(ctx, s.id, req)
	if err != nil {
		return SuspendResponse{}, err
	}
	call := instance.SuspendedCall{
		SuspendID: sus.ID, InstanceID: sus.InstanceID, Kind: instance.KindInstance, Initiator: instance.ByCaller,
		Reason: sus.Reason, SuspendedAt: sus.SuspendedAt, Event: sus.Conditions.Event, Status: instance.StatusPending,
	}
	if err := c.announcePark(ctx, s, call, rfcConditions(sus.Conditions), true); err != nil {
		return SuspendResponse{}, err
	}
	return SuspendResponse{
		Handle:      sus.ID,
		Reason:      sus.Reason,
		SuspendedAt: wireTime(sus.SuspendedAt),
		ResumeWhen:  rfcConditions(sus.Conditions),
		Summary:     sus.Summary,
		Meta:        map[string]any{"mode": string(sus.Mode)},
	}, nil
}

// resume serves session/resume: it resolves the park named by the
// handle (or the latest) with the input, and runs the session on,
// streaming it.
func (c *conn) resume(ctx context.Context, s *session, req ResumeRequest) (ResumeResponse, error) {
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
	return ResumeResponse{Handle: handle, StopReason: stop}, nil
}
