package acp

import (
	"context"
	"errors"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// Prompt runs the session's machine with the prompt's text, streaming
// what happens, and answers its yes-no suspensions with
// session/request_permission in the same turn.
func (c *conn) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	s, err := c.open(ctx, string(p.SessionId))
	if err != nil {
		return acpsdk.PromptResponse{}, err
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return acpsdk.PromptResponse{}, reqErr(err)
	}
	defer done()
	// Calls asked about before (a session loaded with a permission
	// pending) are asked again first.
	m, _, err := c.a.cfg.Runner.Load(ctx, s.id)
	if err != nil {
		return acpsdk.PromptResponse{}, reqErr(err)
	}
	inputs, err := c.askAll(ctx, s, m.Pending())
	if err != nil {
		return c.stopped(ctx, err)
	}
	stop, err := c.drive(ctx, s, append(inputs, machine.UserText(promptText(p.Prompt)))...)
	if err != nil {
		return c.stopped(ctx, err)
	}
	return acpsdk.PromptResponse{StopReason: stop}, nil
}

// stopped is the response of a prompt that ended with err: cancelled if
// ctx was, the error otherwise.
func (c *conn) stopped(ctx context.Context, err error) (acpsdk.PromptResponse, error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
	}
	return acpsdk.PromptResponse{}, reqErr(err)
}

// promptText is the text of a prompt: its text blocks, and its resources
// by link.
func promptText(blocks []acpsdk.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			parts = append(parts, "["+b.ResourceLink.Name+"]("+b.ResourceLink.Uri+")")
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			parts = append(parts, b.Resource.Resource.TextResourceContents.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// drive runs the session with inputs until no yes-no question is left
// open: each run's yes-no suspensions are asked and their answers resume
// it. It returns how the last run stopped.
func (c *conn) drive(ctx context.Context, s *session, inputs ...machine.Input) (acpsdk.StopReason, error) {
	for {
		t := &turn{c: c, s: s, stop: acpsdk.StopReasonEndTurn}
		if err := t.run(ctx, inputs); err != nil {
			if errors.Is(err, machine.ErrMaxSteps) {
				return acpsdk.StopReasonMaxTurnRequests, nil
			}
			return "", err
		}
		if err := t.await(ctx); err != nil {
			return "", err
		}
		var err error
		if inputs, err = c.askAll(ctx, s, t.pending); err != nil {
			return "", err
		}
		if len(inputs) == 0 {
			return t.stop, nil
		}
	}
}

// askAll asks about every yes-no call of pending and returns the resume
// inputs of the answers.
func (c *conn) askAll(ctx context.Context, s *session, pending []instance.SuspendedCall) ([]machine.Input, error) {
	var inputs []machine.Input
	for _, call := range pending {
		if !asksPermission(call) {
			continue
		}
		in, err := c.permission(ctx, s, call)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, in)
	}
	return inputs, nil
}

// turn is one durable run of a session, shown to the client as it
// happens.
type turn struct {
	c    *conn
	s    *session
	stop acpsdk.StopReason
	// pending are the calls still pending when the run ended.
	pending []instance.SuspendedCall
	// parked are the self-parks of this run, announced with
	// session/await_resumption once it ends.
	parked []instance.SuspendedCall
}

// run runs the machine with inputs and streams its events.
func (t *turn) run(ctx context.Context, inputs []machine.Input) error {
	for e, err := range t.c.a.cfg.Runner.RunEvents(ctx, t.s.id, inputs...) {
		if err != nil {
			return err
		}
		if err := t.event(ctx, e); err != nil {
			return err
		}
		if e.Kind != machine.EventStep {
			continue
		}
		t.stepped(e.Step)
	}
	return nil
}

// stepped notes how step st leaves the run.
func (t *turn) stepped(st *machine.Step) {
	if st.Reason == machine.MaxTokens {
		t.stop = acpsdk.StopReasonMaxTokens
	}
	if st.Done || st.Reason == machine.Suspend || st.Reason == machine.AwaitingResume {
		t.pending = st.Suspensions
	}
}

// event shows one machine event to the client.
func (t *turn) event(ctx context.Context, e machine.Event) error {
	id := t.s.id
	switch e.Kind {
	case machine.EventTextDelta:
		return t.c.update(ctx, id, acpsdk.UpdateAgentMessageText(e.Text))
	case machine.EventThinkingDelta:
		return t.c.update(ctx, id, acpsdk.UpdateAgentThoughtText(e.Text))
	case machine.EventToolStarted:
		return t.c.update(ctx, id, acpsdk.StartToolCall(acpsdk.ToolCallId(e.Tool.ToolUseID), e.Tool.Name,
			acpsdk.WithStartKind(acpsdk.ToolKindOther),
			acpsdk.WithStartStatus(acpsdk.ToolCallStatusInProgress),
			acpsdk.WithStartRawInput(rawJSON(e.Tool.Input))))
	case machine.EventToolFinished:
		if e.Tool.SuspendID != "" {
			return nil // EventSuspended shows it
		}
		return t.c.update(ctx, id, finished(e.Tool.ToolUseID, e.Tool.Result, e.Tool.IsError))
	case machine.EventSuspended:
		if e.Call == nil {
			return nil
		}
		if isPark(*e.Call) && e.Call.Initiator != instance.ByCaller {
			t.parked = append(t.parked, *e.Call)
		}
		return t.c.announce(ctx, t.s, *e.Call, true)
	case machine.EventResumed, machine.EventExpired, machine.EventCancelled:
		return t.c.resolved(ctx, t.s, e.Lifecycle)
	case machine.EventStep:
		return t.resolvedResults(ctx, e.Step)
	}
	return nil
}

// resolvedResults shows the results of tool calls a resume resolved.
func (t *turn) resolvedResults(ctx context.Context, st *machine.Step) error {
	for _, msg := range st.Messages {
		if msg.Role != message.Tool {
			continue
		}
		for _, p := range msg.Parts {
			if p.Kind == message.KindToolResult && p.SuspendID != "" {
				if err := t.c.update(ctx, t.s.id, finished(p.ID, p.Text, p.IsError)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// await sends session/await_resumption for each self-park of the run.
func (t *turn) await(ctx context.Context) error {
	for _, call := range t.parked {
		if err := t.c.awaitResumption(ctx, t.s, call); err != nil {
			return err
		}
	}
	return nil
}

// announce shows a pending call: a tool call waiting for an answer
// stays a pending tool call with its reason; a park is a suspended
// update. live is false for a replay.
func (c *conn) announce(ctx context.Context, s *session, call instance.SuspendedCall, live bool) error {
	if call.Kind == instance.KindTool {
		// A replay starts the call: its reply is held on the instance,
		// not in history, until every call of it is resolved.
		if !live {
			start := acpsdk.StartToolCall(acpsdk.ToolCallId(call.ToolUseID), call.Name,
				acpsdk.WithStartKind(acpsdk.ToolKindOther),
				acpsdk.WithStartStatus(acpsdk.ToolCallStatusInProgress),
				acpsdk.WithStartRawInput(rawJSON(call.Input)))
			if err := c.update(ctx, s.id, start); err != nil {
				return err
			}
		}
		if err := c.update(ctx, s.id, pendingCall(call)); err != nil {
			return err
		}
	}
	if !isPark(call) {
		return nil
	}
	return c.announcePark(ctx, s, call, conditionsOf(call), live)
}

// announcePark sends the suspended update of park call, waiting for rc:
// once per connection when live, again on a replay.
func (c *conn) announcePark(ctx context.Context, s *session, call instance.SuspendedCall, rc *ResumeConditions, live bool) error {
	s.park(call)
	c.watch(s)
	if !s.markAnnounced(call.SuspendID) && live {
		return nil
	}
	initiator := InitiatorAgent
	if call.Initiator == instance.ByCaller {
		initiator = InitiatorClient
	}
	return c.notify(ctx, s.id, SuspendedUpdate{
		SessionUpdate: UpdateSuspended,
		Handle:        call.SuspendID,
		Reason:        call.Reason,
		Initiator:     initiator,
		SuspendedAt:   wireTime(call.SuspendedAt),
		ResumeWhen:    rc,
	})
}

// awaitResumption tells the client that the session parked itself.
func (c *conn) awaitResumption(ctx context.Context, s *session, call instance.SuspendedCall) error {
	_, err := c.sdk.CallExtension(ctx, MethodAwaitResumption, AwaitResumptionRequest{
		SessionID:  s.id,
		Reason:     call.Reason,
		Conditions: conditionsOf(call),
		Summary:    summary(call),
		Meta:       map[string]any{"handle": call.SuspendID, "suspendedAt": wireTime(call.SuspendedAt)},
	})
	return err
}

// summary is a one-line account of a park for the client's UI.
func summary(call instance.SuspendedCall) string {
	what := "the session"
	if call.Kind == instance.KindTool {
		what = call.Name
	}
	s := what + " is waiting: " + call.Reason
	if ev := callEvent(call); ev != "" {
		s += " (until the event " + ev + ")"
	}
	return s
}

// resolved reports the resolution of a park with a resumed update.
func (c *conn) resolved(ctx context.Context, s *session, ev *instance.Event) error {
	if ev == nil {
		return nil
	}
	if _, ok := s.unpark(ev.SuspendID); !ok {
		return nil
	}
	return c.resumed(ctx, s.id, ev.SuspendID, rfcCause(ev), ev.HadPayload, !freshTurn(ev), ev.At)
}

// resumed sends a resumed update.
func (c *conn) resumed(ctx context.Context, id, handle, cause string, hadInput, continued bool, at time.Time) error {
	return c.notify(ctx, id, ResumedUpdate{
		SessionUpdate:      UpdateResumed,
		Handle:             handle,
		Cause:              cause,
		HadResumeInput:     hadInput,
		ContinueTranscript: continued,
		ResumedAt:          wireTime(at),
	})
}

// notify sends a draft-RFC session update.
func (c *conn) notify(ctx context.Context, id string, update any) error {
	return c.sdk.NotifyExtension(ctx, MethodUpdate, SessionUpdateNotification{SessionID: id, Update: update})
}

// rfcCause is the RFC's cause of a resolution.
func rfcCause(ev *instance.Event) string {
	switch {
	case ev.Type == instance.EventExpired || ev.Cause == instance.CauseTimeout:
		return CauseTimeout
	case isEventCause(ev):
		return CauseConditionFired
	case ev.Cause == instance.CauseExplicit:
		return CauseExplicitResume
	}
	return CauseExternalEvent
}

// isPark reports whether call parks the session rather than waiting for
// an answer to a tool call: a whole-instance suspension (by the caller,
// a transition or a command), or a call waiting for an event.
func isPark(call instance.SuspendedCall) bool {
	return call.Kind == instance.KindInstance || callEvent(call) != ""
}
