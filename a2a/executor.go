package a2a

// This file is the AgentExecutor: an A2A task as a run of a durable
// machine, its suspensions as input-required and auth-required.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// AnswerArtifact is the ID of a task's answer artifact: the text of the
// model's current reply as it streams, the machine's final answer once
// the task completes.
const AnswerArtifact = "answer"

// Suspension is the data part of an input-required or auth-required
// status message, one per suspension the task waits on.
type Suspension struct {
	SuspendID string `json:"suspendId"`
	// Reason is the question or the message of the suspension.
	Reason string `json:"reason"`
	// Kind and Name are the suspended call's kind (tool, command) and
	// its tool or command name.
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	// Schema is the JSON Schema an answer's payload must satisfy; none:
	// any answer goes.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Metadata is the suspension's metadata, as its tool set it.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Deadline is when the suspension times out; none: never.
	Deadline *time.Time `json:"deadline,omitempty"`
	// DecidedElsewhere marks a suspension this client cannot answer
	// (the task is auth-required).
	DecidedElsewhere bool `json:"decidedElsewhere,omitempty"`
	// Violation is why the last answer to it was refused.
	Violation string `json:"violation,omitempty"`
}

// ToolActivity is the data part of a working status message that
// reports a tool call starting or finishing.
type ToolActivity struct {
	// Event is "started" or "finished".
	Event     string          `json:"event"`
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input,omitempty"`
	Result    string          `json:"result,omitempty"`
	IsError   bool            `json:"isError,omitempty"`
}

// executor is the server's a2asrv.AgentExecutor.
type executor struct{ s *Server }

var _ a2asrv.AgentExecutor = executor{}

// Execute implements a2asrv.AgentExecutor: the first message of a task
// is user input to the context's machine; a message on a task that waits
// answers its suspensions.
func (e executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s, id := e.s, MachineID(ec.ContextID)
		var inputs []machine.Input
		if ec.StoredTask == nil {
			in, err := userInput(ec.Message)
			if err != nil {
				yield(nil, err)
				return
			}
			if _, err := s.runner.Create(ctx, id, s.node, nil); err != nil && !errors.Is(err, store.ErrConflict) {
				yield(nil, err)
				return
			}
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			inputs = []machine.Input{in}
		} else {
			p, err := s.plan(ctx, ec.StoredTask, ec.Message)
			if err != nil {
				yield(nil, err)
				return
			}
			if len(p.violations) > 0 {
				yield(waitingStatus(ec, a2a.TaskStateInputRequired, p.waiting, p.violations), nil)
				return
			}
			inputs = p.inputs
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		t := &turn{ec: ec, yield: yield}
		if len(inputs) > 0 {
			for ev, err := range s.runner.RunEvents(ctx, id, inputs...) {
				if errors.Is(err, durable.ErrRejected) {
					break // another answer was first: show the machine as it is
				}
				if err != nil {
					t.fail(err)
					return
				}
				if !t.event(ev) {
					return
				}
			}
		}
		s.finish(ctx, t, id)
	}
}

// Cancel implements a2asrv.AgentExecutor: the task's pending
// suspensions are cancelled (each call fails "cancelled"), the machine
// runs on, and the task is canceled.
func (e executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s, id := e.s, MachineID(ec.ContextID)
		issued := issuedIDs(ec.StoredTask)
		waiting, err := s.waiting(ctx, id, issued)
		if err != nil {
			yield(nil, err)
			return
		}
		var as []bridge.Answer
		for _, r := range waiting {
			as = append(as, bridge.Answer{SuspendID: r.SuspendID, Action: bridge.Cancel, Reason: "the A2A task was cancelled"})
		}
		if len(as) > 0 {
			applied, err := s.bridge.Inputs(ctx, bridge.Continuation{MachineID: id, SuspendIDs: issued}, as, ResumedBy)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, err := range s.runner.Run(ctx, id, applied.Inputs...) {
				if err != nil && !errors.Is(err, durable.ErrRejected) {
					s.logger.Warn("a2a: cancel: the machine's run failed", "machine", id, "err", err)
				}
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// userInput is the user message of a task's first message: its text
// parts, and its data parts as JSON.
func userInput(msg *a2a.Message) (machine.Input, error) {
	var texts []string
	for _, p := range msg.Parts {
		switch c := p.Content.(type) {
		case a2a.Text:
			texts = append(texts, string(c))
		case a2a.Data:
			b, err := json.Marshal(c.Value)
			if err != nil {
				return nil, fmt.Errorf("%w: a data part: %w", a2a.ErrInvalidParams, err)
			}
			texts = append(texts, string(b))
		default:
			return nil, fmt.Errorf("%w: a %T part: this agent reads text and data parts", a2a.ErrInvalidParams, p.Content)
		}
	}
	return machine.UserText(strings.Join(texts, "\n")), nil
}

// plan is what a message on a task does.
type plan struct {
	// inputs resume the task's suspensions (none: a task that catches
	// up with its machine).
	inputs []machine.Input
	// waiting are the task's suspensions still pending.
	waiting []bridge.Request
	// violations are the refused answers, by suspend ID: nothing is
	// consumed and the task is input-required again.
	violations map[string]string
}

// plan checks a message on task against the task's suspensions and
// returns its inputs, or an error wrapping a2a.ErrInvalidParams (and
// ErrBadAnswer, ErrAlreadyAnswered or ErrDecidedElsewhere). Nothing is
// consumed.
func (s *Server) plan(ctx context.Context, task *a2a.Task, msg *a2a.Message) (plan, error) {
	id := MachineID(task.ContextID)
	issued := issuedIDs(task)
	waiting, err := s.waiting(ctx, id, issued)
	if err != nil {
		return plan{}, err
	}
	p := plan{waiting: waiting}
	switch task.Status.State {
	case a2a.TaskStateAuthRequired:
		if len(waiting) > 0 {
			return plan{}, fmt.Errorf("%w: %w: task %s waits on %s", a2a.ErrInvalidParams, ErrDecidedElsewhere, task.ID, waiting[0].SuspendID)
		}
		return p, nil // decided: the task catches up with its machine
	case a2a.TaskStateInputRequired:
	default:
		return plan{}, fmt.Errorf("%w: %w: task %s is %s, not waiting for input", a2a.ErrInvalidParams, ErrBadAnswer, task.ID, task.Status.State)
	}
	if len(waiting) == 0 {
		return plan{}, fmt.Errorf("%w: %w: task %s: every suspension it waited on is resolved", a2a.ErrInvalidParams, ErrAlreadyAnswered, task.ID)
	}
	as, err := answers(msg, waiting)
	if err != nil {
		return plan{}, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	applied, err := s.bridge.Inputs(ctx, bridge.Continuation{MachineID: id, SuspendIDs: issued}, as, ResumedBy)
	if rej, ok := errors.AsType[*bridge.RejectedError](err); ok {
		p.violations = map[string]string{}
		for _, v := range rej.Violations {
			p.violations[v.SuspendID] = bridge.ViolationText(v.Err)
		}
		return p, nil
	}
	switch {
	case errors.Is(err, bridge.ErrNotInToken) || errors.Is(err, bridge.ErrInvalidAnswer):
		return plan{}, fmt.Errorf("%w: %w: %w", a2a.ErrInvalidParams, ErrBadAnswer, err)
	case err != nil:
		return plan{}, err
	case len(applied.Resolved) > 0:
		return plan{}, fmt.Errorf("%w: %w: %s", a2a.ErrInvalidParams, ErrAlreadyAnswered, strings.Join(applied.Resolved, ", "))
	}
	p.inputs = applied.Inputs
	return p, nil
}

// check refuses a message on an existing task that plan refuses. A task
// that does not exist, or has ended, is the SDK's to refuse.
func (s *Server) check(ctx context.Context, msg *a2a.Message) error {
	st, err := s.tasks.Get(ctx, msg.TaskID)
	if err != nil || st.Task.Status.State.Terminal() || (msg.ContextID != "" && msg.ContextID != st.Task.ContextID) {
		return nil
	}
	_, err = s.plan(ctx, st.Task, msg)
	return err
}

// waiting are the suspensions of issued still pending on machine id.
func (s *Server) waiting(ctx context.Context, id string, issued []string) ([]bridge.Request, error) {
	reqs, err := s.bridge.Requests(ctx, id)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(reqs, func(r bridge.Request) bool { return !slices.Contains(issued, r.SuspendID) }), nil
}

// issuedIDs are the suspend IDs task's status message names.
func issuedIDs(task *a2a.Task) []string {
	if task == nil || task.Status.Message == nil {
		return nil
	}
	var ids []string
	for _, p := range task.Status.Message.Parts {
		d, ok := p.Content.(a2a.Data)
		if !ok {
			continue
		}
		raw, err := json.Marshal(d.Value)
		var sus Suspension
		if err == nil && json.Unmarshal(raw, &sus) == nil && sus.SuspendID != "" {
			ids = append(ids, sus.SuspendID)
		}
	}
	return ids
}

// waitingStatus is the status event of a task waiting on reqs: a text
// part with their reasons (and the violations of refused answers), and a
// data part per suspension.
func waitingStatus(ec *a2asrv.ExecutorContext, state a2a.TaskState, reqs []bridge.Request, violations map[string]string) *a2a.TaskStatusUpdateEvent {
	var lines []string
	var data []*a2a.Part
	for _, r := range reqs {
		sus := Suspension{SuspendID: r.SuspendID, Reason: r.Reason, Kind: r.Kind, Name: r.Name, Schema: r.Schema,
			Metadata: r.Metadata, DecidedElsewhere: elsewhere(r), Violation: violations[r.SuspendID]}
		if !r.Deadline.IsZero() {
			sus.Deadline = &r.Deadline
		}
		line := r.Reason
		if sus.Violation != "" {
			line += " (the answer was refused: " + sus.Violation + ")"
		}
		lines = append(lines, line)
		data = append(data, dataPart(sus))
	}
	parts := append([]*a2a.Part{a2a.NewTextPart(strings.Join(lines, "\n"))}, data...)
	return a2a.NewStatusUpdateEvent(ec, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, parts...))
}

// finish ends a task's execution with the machine's state: completed
// with the answer, input-required on the suspensions the client can
// answer, or auth-required while the rest are decided elsewhere — then
// it follows the machine until those are, and finishes again.
func (s *Server) finish(ctx context.Context, t *turn, id string) {
	for {
		l, err := s.runner.LoadAt(ctx, id)
		if err != nil {
			t.fail(err)
			return
		}
		reqs, err := s.bridge.Requests(ctx, id)
		if err != nil {
			t.fail(err)
			return
		}
		if len(reqs) == 0 {
			answer := bridge.LastAnswer(l.Machine.History())
			art := &a2a.TaskArtifactUpdateEvent{TaskID: t.ec.TaskID, ContextID: t.ec.ContextID, LastChunk: true,
				Artifact: &a2a.Artifact{ID: AnswerArtifact, Name: AnswerArtifact, Parts: a2a.ContentParts{a2a.NewTextPart(answer)}}}
			if t.yield(art, nil) {
				t.yield(a2a.NewStatusUpdateEvent(t.ec, a2a.TaskStateCompleted,
					a2a.NewMessageForTask(a2a.MessageRoleAgent, t.ec, a2a.NewTextPart(answer))), nil)
			}
			return
		}
		if ours := slices.DeleteFunc(slices.Clone(reqs), elsewhere); len(ours) > 0 {
			t.yield(waitingStatus(t.ec, a2a.TaskStateInputRequired, ours, nil), nil)
			return
		}
		if !t.yield(waitingStatus(t.ec, a2a.TaskStateAuthRequired, reqs, nil), nil) || !s.followHere(ctx, t, id, l.EventSeq) {
			return
		}
	}
}

// followHere is follow, the task marked as followed in this process
// meanwhile (Run leaves it alone).
func (s *Server) followHere(ctx context.Context, t *turn, id string, seq int64) bool {
	s.following.Store(t.ec.TaskID, struct{}{})
	defer s.following.Delete(t.ec.TaskID)
	return s.follow(ctx, t, id, seq)
}

// follow streams the events of machine id after seq, as another process
// or caller runs it, until a run of it ends; false when the task's
// execution ends first.
func (s *Server) follow(ctx context.Context, t *turn, id string, seq int64) bool {
	for ev, err := range s.runner.Watch(ctx, id, seq) {
		if err != nil {
			return false // the ctx is done, or the store keeps no event log
		}
		if ev.Echo {
			continue
		}
		if ev.Kind == machine.EventStep {
			if ev.Step != nil && ev.Step.Done {
				return t.yield(a2a.NewStatusUpdateEvent(t.ec, a2a.TaskStateWorking, nil), nil)
			}
			continue
		}
		if !t.event(ev.Event) {
			return false
		}
	}
	return false
}

// turn translates the events of a task's runs into A2A events.
type turn struct {
	ec    *a2asrv.ExecutorContext
	yield func(a2a.Event, error) bool
	// streaming is true while the answer artifact holds the text of the
	// reply streaming now: the next delta appends to it.
	streaming bool
}

// event yields the A2A event of ev, if it has one; false when the
// execution ends.
func (t *turn) event(ev machine.Event) bool {
	switch ev.Kind {
	case machine.EventTextDelta:
		art := &a2a.TaskArtifactUpdateEvent{TaskID: t.ec.TaskID, ContextID: t.ec.ContextID, Append: t.streaming,
			Artifact: &a2a.Artifact{ID: AnswerArtifact, Name: AnswerArtifact, Parts: a2a.ContentParts{a2a.NewTextPart(ev.Text)}}}
		t.streaming = true
		return t.yield(art, nil)
	case machine.EventToolStarted, machine.EventToolFinished:
		t.streaming = false
		act := ToolActivity{Event: "started", ToolUseID: ev.Tool.ToolUseID, Name: ev.Tool.Name, Input: ev.Tool.Input}
		if ev.Kind == machine.EventToolFinished {
			act = ToolActivity{Event: "finished", ToolUseID: ev.Tool.ToolUseID, Name: ev.Tool.Name, Result: ev.Tool.Result, IsError: ev.Tool.IsError}
		}
		return t.yield(a2a.NewStatusUpdateEvent(t.ec, a2a.TaskStateWorking,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, t.ec, dataPart(act))), nil)
	case machine.EventStep:
		t.streaming = false
	}
	return true
}

// dataPart is a data part of v as JSON sees it (maps, slices, strings,
// numbers, booleans): the SDK copies events with encoding/gob, which
// knows those types and none of ours.
func dataPart(v any) *a2a.Part {
	var generic any
	if raw, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(raw, &generic) // JSON it just wrote
	}
	return a2a.NewDataPart(generic)
}

// fail ends the execution with the task failed, err its message.
func (t *turn) fail(err error) {
	t.yield(a2a.NewStatusUpdateEvent(t.ec, a2a.TaskStateFailed,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, t.ec, a2a.NewTextPart(err.Error()))), nil)
}
