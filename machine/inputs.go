package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/internal/tracing"
	"github.com/markov-agents/markov/message"
)

// applyInputs validates inputs, applies them to a copy of the tree, sweeps
// expired suspensions and commits. It returns the command steps and the
// transaction whose messages the first round step reports.
func (m *Machine) applyInputs(ctx context.Context, inputs []Input) ([]Step, *report, error) {
	now := m.deadlineClock()
	if len(inputs) == 0 && !m.anyExpired(now) {
		return nil, nil, nil
	}
	if err := m.validateResumes(inputs, now); err != nil {
		return nil, nil, err
	}
	t := m.newTx(ctx, m.root.Clone(nil), nil)
	var steps []Step
	for _, in := range inputs {
		switch v := in.(type) {
		case message.Message:
			t.userMessage(v)
		case *message.Message:
			t.userMessage(*v)
		case command.Invocation:
			s, err := t.command(v)
			if err != nil {
				return nil, nil, err
			}
			steps = append(steps, s...)
		case ResumeInput:
			s, err := t.resumeWith(v, resolution{cause: instance.CauseExplicit})
			if err != nil {
				return nil, nil, err
			}
			steps = append(steps, s...)
		case CancelInput:
			s, err := t.cancel(v)
			if err != nil {
				return nil, nil, err
			}
			steps = append(steps, s...)
		case SignalInput:
			s, err := t.signal(v, now)
			if err != nil {
				return nil, nil, err
			}
			steps = append(steps, s...)
		}
	}
	ruled, err := t.standing()
	if err != nil {
		return nil, nil, err
	}
	steps = append(steps, ruled...)
	steps = append(steps, t.expire(now)...)
	m.commit(t)
	return steps, t.leftover(), nil
}

// validateResumes checks every ResumeInput before anything is applied: one
// bad ID fails the whole call.
func (m *Machine) validateResumes(inputs []Input, now time.Time) error {
	seen := map[string]bool{}
	claim := func(id string) error {
		if seen[id] {
			return fmt.Errorf("suspension %s named twice in one run: %w", id, instance.ErrAlreadyResolved)
		}
		seen[id] = true
		return nil
	}
	for _, in := range inputs {
		switch v := in.(type) {
		case message.Message, *message.Message, command.Invocation:
		case ResumeInput:
			if err := claim(v.SuspendID); err != nil {
				return err
			}
			if err := m.checkResumable(m.root, v.SuspendID, now); err != nil {
				return err
			}
			if err := checkPayload(m.root, v); err != nil {
				return err
			}
			if err := checkDecision(m.root, v, now); err != nil {
				return err
			}
		case CancelInput:
			if err := claim(v.SuspendID); err != nil {
				return err
			}
			// A cancel is accepted past the deadline.
			if err := m.checkResumable(m.root, v.SuspendID, time.Time{}); err != nil {
				return err
			}
			if err := checkCancel(m.root, v, now); err != nil {
				return err
			}
		case SignalInput:
			if err := checkSignal(v); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: %T", ErrBadInput, in)
		}
	}
	return nil
}

// checkResumable reports why suspension id of root cannot be resumed at
// now (the zero time: whatever its deadline), if it can't.
func (m *Machine) checkResumable(root *instance.Instance, id string, now time.Time) error {
	if id == "" {
		return fmt.Errorf("empty suspend ID: %w", instance.ErrUnknownSuspendID)
	}
	_, c := root.FindCall(id)
	if c == nil {
		if m.resolvedBefore(id) {
			return fmt.Errorf("suspension %s: %w", id, instance.ErrAlreadyResolved)
		}
		if _, pending := next(root.Pending()); !pending {
			return fmt.Errorf("suspension %s: %w: %w", id, instance.ErrUnknownSuspendID, instance.ErrNotSuspended)
		}
		return fmt.Errorf("suspension %s: %w", id, instance.ErrUnknownSuspendID)
	}
	if err := c.CheckPending(); err != nil {
		return err
	}
	if c.Expired(now) {
		return fmt.Errorf("suspension %s (deadline %s): %w", id, c.Deadline.Format(time.RFC3339), ErrDeadlinePassed)
	}
	return nil
}

// CheckPayload reports whether Run would accept the payload of resume in
// for its call, changing nothing and calling nothing: the payload must
// encode, and satisfy the call's payload schema (a typed resume,
// node.ResumeWith) unless it is an error payload; a rejection wraps
// instance.ErrPayloadDecode. A call the machine does not hold is not
// checked. An acceptor that queues a resume for a later run
// (durable/fleet) checks its payload when it accepts it, as the call's
// schema cannot change while it is pending.
func (m *Machine) CheckPayload(in ResumeInput) error { return checkPayload(m.root, in) }

// checkPayload checks the payload of ri, a resume of a pending call of
// root: it must encode, and satisfy the call's payload schema unless it is
// an error payload. A rejection wraps instance.ErrPayloadDecode.
func checkPayload(root *instance.Instance, ri ResumeInput) error {
	payload, err := instance.EncodePayload(ri.Payload)
	if err != nil {
		return fmt.Errorf("resume %s: %w", ri.SuspendID, err)
	}
	if _, c := root.FindCall(ri.SuspendID); c != nil {
		return frame.CheckPayload(c, payload, ri.IsError)
	}
	return nil
}

// resolvedBefore reports whether history records a resolution of id.
func (m *Machine) resolvedBefore(id string) bool {
	h := m.history.Messages()
	for i := len(h) - 1; i >= 0; i-- {
		for _, p := range h[i].Parts {
			if p.SuspendID == id {
				return true
			}
		}
	}
	return false
}

func errDuplicateID(id string) error {
	return fmt.Errorf("%w: suspend ID %q", executor.ErrDuplicateID, id)
}

// userMessage adds user input to history and wakes the primary leaf. The
// caller's own input is not reported back in steps. Input for a primary
// leaf that holds a reply waits on it, to enter history after the reply
// and its results.
func (t *tx) userMessage(msg message.Message) {
	msg.Role = message.User
	msg.Source = message.Source{}
	if l := t.primaryLeaf(); l != nil && l.Suspension != nil && l.Suspension.Reply != nil {
		t.deferInput(l, msg)
		return
	}
	caughtUp := t.reported == len(t.added)
	t.add(msg.Clone())
	if caughtUp {
		t.reported++
	}
	t.wake(msg)
}

// command runs an invocation and applies its effects.
func (t *tx) command(inv command.Invocation) ([]Step, error) {
	target, err := t.target(inv.InstanceID)
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", inv.Name, err)
	}
	input, err := commandInput(inv.Input)
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", inv.Name, err)
	}
	co, err := t.exec.Command(t.ctx, &executor.CommandRequest{Root: t.root, Instance: target, Name: inv.Name, Input: input, InvocationID: inv.ID, Admit: t.m.admission(), Journal: t.m.journal})
	if err != nil {
		return nil, err
	}
	res := &command.Result{Name: inv.Name, InstanceID: target.ID, Value: co.Value}
	t.applyCommand(target, co)
	record := map[string]any{"command": inv.Name, "input": json.RawMessage(input)}
	if co.Suspended != nil {
		if _, c := t.root.FindCall(co.Suspended.SuspendID); c != nil {
			return nil, errDuplicateID(co.Suspended.SuspendID)
		}
		t.suspended(target, *co.Suspended)
		call := co.Suspended.Clone()
		res.Suspension = &call
		record["suspend_id"] = call.SuspendID
	} else if v, err := instance.EncodePayload(co.Value); err == nil {
		record["value"] = v
	}
	steps := []Step{}
	for _, r := range co.Resumes {
		ri := ResumeInput{SuspendID: r.SuspendID, Payload: r.Payload, IsError: r.IsError}
		if err := t.m.checkResumable(t.root, r.SuspendID, t.m.deadlineClock()); err != nil {
			return nil, fmt.Errorf("command %s: %w", inv.Name, err)
		}
		if err := checkPayload(t.root, ri); err != nil {
			return nil, fmt.Errorf("command %s: %w", inv.Name, err)
		}
		s, err := t.resumeWith(ri, resolution{cause: instance.CauseCommand, command: inv.Name})
		if err != nil {
			return nil, fmt.Errorf("command %s: %w", inv.Name, err)
		}
		steps = append(steps, s...)
	}
	if co.Transition != nil {
		if k := co.Transition.Kind; (k == instance.EffectGoto || k == instance.EffectCede) && target.Suspended() {
			return nil, fmt.Errorf("command %s: %w: %s of instance %s (resolve or cancel them first)", inv.Name, ErrCallsPending, k, target.ID)
		}
		record["effect"] = co.Transition.Kind.String()
		t.applyEffect(target, *co.Transition, false)
	}
	t.record(target, "command", record, "")
	s := t.step(Command)
	s.Command = res
	return append([]Step{s}, steps...), nil
}

// next returns the first value of seq, if any.
func next[T any](seq iter.Seq[T]) (T, bool) {
	for v := range seq {
		return v, true
	}
	var zero T
	return zero, false
}

// target resolves a command's target: the named instance, or the primary
// leaf (suspended or not).
func (t *tx) target(id string) (*instance.Instance, error) {
	if id != "" {
		if in := t.root.Find(id); in != nil {
			return in, nil
		}
		return nil, fmt.Errorf("%w: instance %q", command.ErrNoTarget, id)
	}
	if l := t.primaryLeaf(); l != nil {
		return l, nil
	}
	return nil, command.ErrNoTarget
}

func commandInput(v any) (json.RawMessage, error) {
	switch in := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case []byte:
		if !json.Valid(in) {
			return nil, fmt.Errorf("%w: input is not JSON", instance.ErrInvalidInput)
		}
		return in, nil
	}
	raw, err := instance.EncodePayload(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", instance.ErrInvalidInput, err)
	}
	return raw, nil
}

// resumeWith resolves one suspension with the caller's payload, r saying
// why (cause, signal).
func (t *tx) resumeWith(ri ResumeInput, r resolution) ([]Step, error) {
	in, call := t.root.FindCall(ri.SuspendID)
	if call == nil {
		return nil, fmt.Errorf("suspension %s: %w", ri.SuspendID, instance.ErrUnknownSuspendID)
	}
	payload, err := instance.EncodePayload(ri.Payload)
	if err != nil {
		return nil, err
	}
	var d instance.Decision
	if r.cause == instance.CauseExplicit {
		d = t.decision(ri.By, ri.Groups, ri.Digest, ri.Deny, ri.IsError, payload)
		d.Rule = r.rule
		if call.Policy != nil && r.rule != "" {
			r.decisions = []instance.Decision{d} // the policy allows rules (standing.Set.Match)
		} else if call.Policy != nil {
			settled, err := t.vote(in, call, ri, payload)
			if err != nil || settled == nil {
				return nil, err
			}
			r.decisions, d = settled, settled[len(settled)-1]
		}
	}
	if ri.FreshTurn {
		if err := t.freshTurn(in, call); err != nil {
			return nil, fmt.Errorf("resume %s: %w", ri.SuspendID, err)
		}
	}
	r.payload, r.value, r.isError, r.fresh, r.by = payload, ri.Payload, ri.IsError, ri.FreshTurn, ri.By
	r.event, r.mark = instance.EventResumed, (*instance.SuspendedCall).Resolve
	c := *call
	steps, err := t.resolve(in, call, r)
	t.decided(in, err, ri.SuspendID, r)
	if err == nil {
		switch r.cause {
		case instance.CauseExplicit:
			outcome := DecisionApproved
			if d.Deny {
				outcome = DecisionDenied
			}
			t.decide(in, &c, d, outcome)
		case instance.CauseCommand:
			t.decide(in, &c, t.decision(r.command, nil, "", false, ri.IsError, payload), DecisionCommand)
		case instance.CauseEvent:
			t.decide(in, &c, t.decision(ri.By, nil, "", false, ri.IsError, payload), DecisionSignal)
		}
	}
	return steps, err
}

// DecidedRecord is the data of the "decided" record the history keeps
// beside a resolution whose caller named who decided (ResumeInput.By,
// CancelInput.By, SignalInput.By): who, the decision (resumed or
// cancelled) and, for a resume, the payload and whether it was an error.
type DecidedRecord struct {
	By       string             `json:"by"`
	Decision instance.EventType `json:"decision"`
	Payload  json.RawMessage    `json:"payload,omitempty"`
	IsError  bool               `json:"is_error,omitempty"`
}

// decided records who made the decision r that resolved suspendID, when
// the caller named someone and the resolution succeeded.
func (t *tx) decided(in *instance.Instance, err error, suspendID string, r resolution) {
	if err == nil && r.by != "" {
		t.record(in, "decided", DecidedRecord{By: r.by, Decision: r.event, Payload: r.payload, IsError: r.isError}, suspendID)
	}
}

// cancel resolves one suspension as cancelled.
func (t *tx) cancel(ci CancelInput) ([]Step, error) {
	in, call := t.root.FindCall(ci.SuspendID)
	if call == nil {
		return nil, fmt.Errorf("suspension %s: %w", ci.SuspendID, instance.ErrUnknownSuspendID)
	}
	c := *call
	text := "cancelled"
	if ci.Reason != "" {
		text += ": " + ci.Reason
	}
	r := resolution{
		failure: text, cause: instance.CauseCancel, by: ci.By,
		event: instance.EventCancelled, mark: (*instance.SuspendedCall).Cancel,
	}
	steps, err := t.resolve(in, call, r)
	t.decided(in, err, ci.SuspendID, r)
	if err == nil {
		t.decide(in, &c, t.decision(ci.By, ci.Groups, "", false, true, nil), DecisionCancelled)
	}
	return steps, err
}

// resolution is how a suspension leaves pending.
type resolution struct {
	payload json.RawMessage
	value   any
	isError bool
	// failure, when set, resolves the call as this error, bypassing resume
	// handlers (cancellation, a deadline without a resume action).
	failure string
	// summary, when set, resolves the call with this text as a plain
	// result, bypassing resume handlers (a deadline's OnTimeoutSummary).
	summary string
	// signal is the event that resumed the call (cause CauseEvent); fresh
	// a fresh-turn resume.
	signal string
	fresh  bool
	cause  instance.Cause
	// by names who decided (ResumeInput.By); command the command that
	// resolved the call (cause CauseCommand).
	by, command string
	// decisions are the decisions that settled a governed call.
	decisions []instance.Decision
	// rule is the standing rule that decided (tx.standing).
	rule  string
	event instance.EventType
	mark  func(*instance.SuspendedCall) error
}

// resolve moves call out of pending and delivers its result.
func (t *tx) resolve(in *instance.Instance, call *instance.SuspendedCall, r resolution) ([]Step, error) {
	if err := t.markCall(call, r.mark); err != nil {
		return nil, err
	}
	c := *call // the slice may grow below
	_, span := tracing.Start(t.ctx, t.tracer, "markov.resume")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.suspend_id", c.SuspendID), attribute.String("markov.instance", in.ID),
			attribute.String("markov.kind", string(c.Kind)), attribute.String("markov.cause", string(r.cause)))
	}
	defer span.End()
	if l, ok := telemetry.Link(c.TraceParent, c.SuspendID); ok {
		span.AddLink(l)
		t.links = append(t.links, l)
	}
	t.events = append(t.events, instance.Event{
		Type: r.event, SuspendID: c.SuspendID, InstanceID: in.ID, Kind: c.Kind,
		Name: c.Name, Initiator: c.Initiator, Cause: r.cause, HadPayload: r.payload != nil, At: t.now().UTC(),
		Signal: r.signal, FreshTurn: r.fresh, By: r.by,
	})
	var steps []Step
	switch c.Kind {
	case instance.KindTool:
		if err := t.resolveTool(in, c, r); err != nil {
			return nil, err
		}
	case instance.KindCommand:
		value := r.value
		if r.failure != "" {
			value = r.failure
		} else if r.summary != "" {
			value = r.summary
		}
		t.record(in, "command_resumed", map[string]any{"command": c.Name, "payload": r.payload, "is_error": r.isError || r.failure != ""}, c.SuspendID)
		s := t.step(Command)
		s.Command = &command.Result{Name: c.Name, InstanceID: in.ID, Value: value}
		steps = append(steps, s)
	case instance.KindInstance:
		if r.payload != nil {
			t.add(message.Message{
				Role:   message.User,
				Parts:  []message.Part{instancePayload(c, r)},
				Source: message.Source{To: in.ID},
			})
			t.wakeInstance(in)
		} else {
			t.record(in, string(r.event), map[string]any{"reason": c.Reason, "failure": r.failure}, c.SuspendID)
		}
	}
	t.finish(in)
	return steps, nil
}

// instancePayload is the part a whole-instance suspension's resolution
// hands the instance: the payload's text, or — for an error resolution
// (ResumeInput.IsError) — the error, flagged (Part.IsError) and worded
// as an error, so that neither code nor a model takes it for something
// the user said.
func instancePayload(c instance.SuspendedCall, r resolution) message.Part {
	text := frame.PayloadText(r.payload)
	if !r.isError {
		return message.Part{Kind: message.KindText, Text: text, SuspendID: c.SuspendID}
	}
	return message.Part{Kind: message.KindText, IsError: true, SuspendID: c.SuspendID,
		Text: fmt.Sprintf("Error: the wait %q ended with an error, not with a message from the user: %s", c.Reason, text)}
}

// resolveTool delivers the result of tool call c of in: the failure, or
// what the tool's resume handler makes of the payload, into the held
// reply's slot; or, when the handler suspends again, the new call.
func (t *tx) resolveTool(in *instance.Instance, c instance.SuspendedCall, r resolution) error {
	part := message.ToolResult(c.ToolUseID, r.failure, true)
	if r.summary != "" {
		part = message.ToolResult(c.ToolUseID, r.summary, false)
	} else if r.failure == "" {
		res, err := t.exec.Resume(t.ctx, &executor.ResumeRequest{Root: t.root, Instance: in, Call: c, Admit: t.m.admission(), Journal: t.m.journal,
			Resolution: instance.Resolution{SuspendID: c.SuspendID, Payload: r.payload, IsError: r.isError, Metadata: c.Metadata, Stage: c.Stage,
				Cause: r.cause, By: r.by, Signal: r.signal, Command: r.command, Decisions: r.decisions}})
		if err != nil {
			return err
		}
		if res.StateChanged {
			t.setState(in, res.State)
		}
		if res.Pack != "" {
			t.setPack(res.Pack, res.PackState)
		}
		if res.Again != nil {
			// The result will name the last stage only: history records
			// this stage, so its ID stays known as resolved.
			t.suspended(in, *res.Again)
			t.record(in, string(r.event), map[string]any{"tool": c.Name, "stage": c.Stage, "suspended_again": res.Again.SuspendID}, c.SuspendID)
			return nil
		}
		part = res.Result
		part.Text = editNote(r.decisions) + part.Text
	}
	part.SuspendID = c.SuspendID
	t.fillSlot(in, part)
	return nil
}

func expiredText(c *instance.SuspendedCall) string {
	return fmt.Sprintf("suspension %s expired at %s without a result (%s)", c.SuspendID, c.Deadline.Format(time.RFC3339), c.Reason)
}

// anyExpired reports a pending suspension whose deadline has passed, or
// whose reminder is due.
func (m *Machine) anyExpired(now time.Time) bool {
	for c := range m.root.Pending() {
		if c.Expired(now) || c.ReminderDue(now) {
			return true
		}
	}
	return false
}

// expire resolves every expired suspension by its on-timeout action, and
// reminds those whose reminder is due.
func (t *tx) expire(now time.Time) []Step {
	var expired, due []string
	for c := range t.root.Pending() {
		switch {
		case c.Expired(now):
			expired = append(expired, c.SuspendID)
		case c.ReminderDue(now):
			due = append(due, c.SuspendID)
		}
	}
	for _, id := range due {
		if in, c := t.root.FindCall(id); c != nil {
			t.remind(in, c, now)
		}
	}
	var steps []Step
	for _, id := range expired {
		in, c := t.root.FindCall(id)
		if c == nil || c.Status != instance.StatusPending {
			continue
		}
		if t.escalate(in, c, now) {
			continue
		}
		r := resolution{cause: instance.CauseTimeout, event: instance.EventExpired, mark: (*instance.SuspendedCall).Expire}
		outcome := DecisionExpired
		switch {
		case c.OnTimeout.Resume:
			r.payload, r.isError = c.OnTimeout.Payload, c.OnTimeout.IsError
			r.value = json.RawMessage(r.payload)
			if c.OnTimeout.Deny {
				outcome = DecisionDenied
				r.decisions = []instance.Decision{t.decision("", nil, c.Digest, true, r.isError, r.payload)}
			}
		case c.OnTimeout.Summarize:
			r.summary = instance.TimeoutSummary(c)
			r.payload, _ = json.Marshal(r.summary)
			r.value = r.summary
		default:
			r.failure = expiredText(c)
		}
		call := *c
		s, err := t.resolve(in, c, r)
		if err != nil {
			continue
		}
		t.decide(in, &call, t.decision("", nil, call.Digest, outcome == DecisionDenied, r.isError || r.failure != "", r.payload), outcome)
		steps = append(steps, s...)
	}
	return steps
}

// escalate moves call c of in, whose deadline passed at now, to its
// policy's escalation, if it has one: the call stays pending (an
// "escalated" lifecycle event, history record and audited decision).
func (t *tx) escalate(in *instance.Instance, c *instance.SuspendedCall, now time.Time) bool {
	from := c.Digest
	ok, err := c.Escalate(in.Node, now)
	if err != nil || !ok {
		return false
	}
	t.events = append(t.events, instance.Event{Type: instance.EventEscalated, SuspendID: c.SuspendID, InstanceID: in.ID, Kind: c.Kind,
		Name: c.Name, Initiator: c.Initiator, Cause: instance.CauseTimeout, At: t.now().UTC()})
	t.record(in, "escalated", map[string]any{"from_digest": from, "digest": c.Digest, "deadline": c.Deadline, "policy": c.Policy}, c.SuspendID)
	t.decide(in, c, t.decision("", nil, c.Digest, false, false, nil), DecisionEscalated)
	return true
}

// remind records the reminder of call c of in, due at now, and schedules
// the next: a "reminded" lifecycle event, history record and audited
// entry; the call stays pending, its deadline and digest unchanged.
func (t *tx) remind(in *instance.Instance, c *instance.SuspendedCall, now time.Time) {
	due := c.RemindAt
	c.ScheduleReminder(now)
	t.events = append(t.events, instance.Event{Type: instance.EventReminded, SuspendID: c.SuspendID, InstanceID: in.ID, Kind: c.Kind,
		Name: c.Name, Initiator: c.Initiator, Cause: instance.CauseTimeout, At: t.now().UTC()})
	t.record(in, "reminded", map[string]any{"due": due, "next": c.RemindAt, "deadline": c.Deadline, "digest": c.Digest}, c.SuspendID)
	t.decide(in, c, t.decision("", nil, c.Digest, false, false, nil), DecisionReminded)
}

// Expire resolves every suspension whose deadline is at or before now by
// its on-timeout action, and reminds those whose reminder is due
// (instance.Policy.Remind), as the start of every Run does, and returns the
// lifecycle events. The next Run continues the woken instances, and its
// first step reports what the expiry released (the replies and results,
// the events, cedes) as it does for resumes. [Machine.ExpireEvents] is
// Expire with every event a run would show for it.
func (m *Machine) Expire(now time.Time) ([]instance.Event, error) {
	if !m.running.CompareAndSwap(false, true) {
		return nil, ErrRunning
	}
	defer m.running.Store(false)
	_, events := m.expire(now)
	return events, nil
}

// expire is Expire, m marked running; it also returns the command steps
// of the command suspensions it resolved.
func (m *Machine) expire(now time.Time) ([]Step, []instance.Event) {
	t := m.newTx(context.Background(), m.root.Clone(nil), nil)
	steps := t.expire(now)
	m.commit(t)
	m.unreported = m.unreported.merge(t.leftover())
	m.finishPre(steps)
	return steps, slices.Clone(t.events)
}
