package agui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ag-ui-protocol/ag-ui/sdks/community/go/pkg/core/types"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// RunAgentInput is AG-UI's request to run an agent, as the community Go
// SDK of AG-UI types it.
type RunAgentInput = types.RunAgentInput

// messageWindow is how long a user message's ID is remembered, so that
// a client sending the same message again (a retry) does not add it
// twice.
const messageWindow = 7 * 24 * time.Hour

// DecodeInput decodes and checks a RunAgentInput: JSON, a threadId that
// can name a machine (store.ValidID), a runId, and resume entries with an
// interruptId and the status "resolved" or "cancelled". Any other input
// fails with an error wrapping ErrInvalidInput that names the field.
func DecodeInput(body []byte) (RunAgentInput, error) {
	var in RunAgentInput
	if err := json.Unmarshal(body, &in); err != nil {
		return RunAgentInput{}, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	switch {
	case !store.ValidID(in.ThreadID):
		return in, fmt.Errorf("%w: threadId: not a valid ID (1 to %d bytes of UTF-8, no NUL)", ErrInvalidInput, store.MaxIDLen)
	case in.RunID == "":
		return in, fmt.Errorf("%w: runId is required", ErrInvalidInput)
	}
	for i, e := range in.Resume {
		switch {
		case e.InterruptID == "":
			return in, fmt.Errorf("%w: resume[%d].interruptId is required", ErrInvalidInput, i)
		case e.Status != types.ResumeStatusResolved && e.Status != types.ResumeStatusCancelled:
			return in, fmt.Errorf("%w: resume[%d].status %q: want resolved or cancelled", ErrInvalidInput, i, e.Status)
		}
	}
	return in, nil
}

// start checks in against its thread and starts its run in the
// background; it returns the run and the event log's position before
// it. Nothing changes when it fails.
func (h *Handler) start(ctx context.Context, in RunAgentInput, by string) (*liveRun, int64, error) {
	thread := in.ThreadID
	lr := &liveRun{done: make(chan struct{}), watching: make(chan struct{})}
	h.mu.Lock()
	if h.live[thread] != nil {
		h.mu.Unlock()
		return nil, 0, fmt.Errorf("%w: thread %s", ErrRunInProgress, thread)
	}
	h.live[thread] = lr
	h.mu.Unlock()
	ok := false
	defer func() {
		if !ok {
			h.forget(thread, lr)
		}
	}()
	if len(in.Resume) == 0 {
		if _, err := h.runner.Create(ctx, thread, h.node, nil); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, 0, err
		}
	}
	if busy, err := h.isBusy(ctx, thread); err != nil {
		return nil, 0, err
	} else if busy {
		return nil, 0, fmt.Errorf("%w: thread %s, in another process", ErrRunInProgress, thread)
	}
	var inputs []machine.Input
	if len(in.Resume) > 0 {
		var err error
		if inputs, err = h.answers(ctx, thread, in.Resume, by); err != nil {
			return nil, 0, err
		}
	}
	loaded, err := h.runner.LoadAt(ctx, thread)
	if err != nil {
		return nil, 0, err
	}
	if len(in.Resume) == 0 {
		if inputs, err = h.message(ctx, in); err != nil {
			return nil, 0, err
		}
	}
	ok = true
	h.runs.Go(func() {
		defer close(lr.done)
		defer h.forget(thread, lr)
		select {
		case <-lr.watching:
		case <-h.ctx.Done():
		}
		for _, err := range h.runner.Run(h.ctx, thread, inputs...) {
			if err != nil {
				lr.err = err
				h.logError(h.ctx, "run failed", thread, err)
			}
		}
	})
	return lr, loaded.EventSeq, nil
}

// forget removes lr from the runs in progress.
func (h *Handler) forget(thread string, lr *liveRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.live[thread] == lr {
		delete(h.live, thread)
	}
}

// message is the input of in's last message when it is a user message
// the thread has not had yet; none otherwise (the run continues pending
// work).
func (h *Handler) message(ctx context.Context, in RunAgentInput) ([]machine.Input, error) {
	if len(in.Messages) == 0 {
		return nil, nil
	}
	last := in.Messages[len(in.Messages)-1]
	if last.Role != types.RoleUser {
		return nil, nil
	}
	text, err := userText(last)
	if err != nil {
		return nil, err
	}
	if last.ID != "" {
		fresh, err := h.replays.Remember(ctx, messageKey(in.ThreadID, last.ID), time.Now().Add(messageWindow))
		if err != nil {
			return nil, err
		}
		if !fresh {
			return nil, nil // sent before: continue, do not add it again
		}
	}
	return []machine.Input{machine.UserText(text)}, nil
}

// messageKey is the replay guard's key of user message id of thread.
func messageKey(thread, id string) string {
	sum := sha256.Sum256([]byte(thread + "\x00" + id))
	return "agui-message-" + hex.EncodeToString(sum[:16])
}

// userText is the text of user message m: its string content, or the
// text parts of its content joined.
func userText(m types.Message) (string, error) {
	if s, ok := m.ContentString(); ok {
		return s, nil
	}
	parts, ok := m.Content.([]any)
	if !ok {
		return "", fmt.Errorf("%w: messages: the last user message has no content", ErrInvalidInput)
	}
	var texts []string
	for _, p := range parts {
		if o, ok := p.(map[string]any); ok && o["type"] == "text" {
			if t, ok := o["text"].(string); ok {
				texts = append(texts, t)
			}
		}
	}
	if len(texts) == 0 {
		return "", fmt.Errorf("%w: messages: the last user message has no text part", ErrInvalidInput)
	}
	return strings.Join(texts, "\n"), nil
}

// answers are the inputs that apply entries to thread's interrupts. An
// interrupt that is not the thread's pending suspension, and a payload
// its schema refuses, fail the whole set: nothing is applied.
func (h *Handler) answers(ctx context.Context, thread string, entries []types.ResumeEntry, by string) ([]machine.Input, error) {
	c := bridge.Continuation{MachineID: thread}
	answers := make([]bridge.Answer, 0, len(entries))
	for i, e := range entries {
		if err := h.checkInterrupt(ctx, thread, e.InterruptID); err != nil {
			return nil, fmt.Errorf("resume[%d]: %w", i, err)
		}
		a := bridge.Answer{SuspendID: e.InterruptID, Action: bridge.Accept}
		if e.Status == types.ResumeStatusCancelled {
			a.Action, a.Reason = bridge.Cancel, "cancelled by "+by
		} else if e.Payload != nil {
			p, err := json.Marshal(e.Payload)
			if err != nil {
				return nil, fmt.Errorf("%w: resume[%d].payload: %w", ErrInvalidInput, i, err)
			}
			a.Payload = p
		}
		c.SuspendIDs = append(c.SuspendIDs, e.InterruptID)
		answers = append(answers, a)
	}
	applied, err := h.bridge.Inputs(ctx, c, answers, by)
	if rej, ok := errors.AsType[*bridge.RejectedError](err); ok {
		return nil, fmt.Errorf("%w: %s", ErrInvalidPayload, violations(rej))
	} else if errors.Is(err, bridge.ErrInvalidAnswer) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	} else if err != nil {
		return nil, err
	}
	if len(applied.Resolved) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInterruptResolved, strings.Join(applied.Resolved, ", "))
	}
	return applied.Inputs, nil
}

// checkInterrupt checks that id is a pending suspension of thread.
func (h *Handler) checkInterrupt(ctx context.Context, thread, id string) error {
	sus, err := h.runner.Suspension(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && sus.MachineID != thread:
		return fmt.Errorf("%w: %s is no interrupt of thread %s", ErrUnknownInterrupt, id, thread)
	case err != nil:
		return err
	}
	switch sus.Status {
	case store.StatusResolved:
		return fmt.Errorf("%w: %s", ErrInterruptResolved, id)
	case store.StatusCancelled:
		return fmt.Errorf("%w: %s", ErrInterruptCancelled, id)
	case store.StatusExpired:
		return fmt.Errorf("%w: %s", ErrInterruptExpired, id)
	}
	return nil
}

// violations is the text of a rejected set of answers: each interrupt
// and what is wrong with its payload.
func violations(rej *bridge.RejectedError) string {
	out := make([]string, 0, len(rej.Violations))
	for _, v := range rej.Violations {
		msg := v.Err.Error()
		if pe, ok := errors.AsType[*instance.PayloadError](v.Err); ok {
			msg = pe.Violation
			if pe.Field != "" {
				msg = pe.Field + ": " + msg
			}
		}
		out = append(out, v.SuspendID+": "+msg)
	}
	return strings.Join(out, "; ")
}
