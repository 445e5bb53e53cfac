package agui

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ag-ui-protocol/ag-ui/sdks/community/go/pkg/core/events"
	"github.com/ag-ui-protocol/ag-ui/sdks/community/go/pkg/core/types"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

// stream writes AG-UI events as Server-Sent Events. Its methods are
// safe for concurrent use (the heartbeat writes beside the events).
type stream struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// newStream opens the event stream of w.
func newStream(w http.ResponseWriter, heartbeat time.Duration) *stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w)}
	s.write([]byte(": markov AG-UI stream\n\n"))
	return s
}

// write writes and flushes frame, extending the write deadline; the
// first failure is kept, and the writes after it do nothing.
func (s *stream) write(frame []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(time.Minute))
	if _, s.err = s.w.Write(frame); s.err == nil {
		s.err = s.rc.Flush()
	}
}

// send writes event e, with the SSE id seq when seq > 0.
func (s *stream) send(seq int64, e events.Event) {
	id := ""
	if seq > 0 {
		id = strconv.FormatInt(seq, 10)
	}
	s.sendID(id, e)
}

// sendID writes event e with the SSE id id ("": none).
func (s *stream) sendID(id string, e events.Event) {
	data, err := e.ToJSON()
	if err != nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		return
	}
	var frame []byte
	if id != "" {
		frame = append(frame, "id: "+id+"\n"...)
	}
	frame = append(frame, "data: "...)
	frame = append(frame, data...)
	frame = append(frame, "\n\n"...)
	s.write(frame)
}

// moveID sends an SSE id alone: it moves the client's last event ID on
// and dispatches nothing.
func (s *stream) moveID(seq int64) {
	s.write([]byte("id: " + strconv.FormatInt(seq, 10) + "\n\n"))
}

// beat sends a comment line every interval until ctx is done.
func (s *stream) beat(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.write([]byte(": heartbeat\n\n"))
		}
	}
}

// refuse ends the stream with the RUN_ERROR of err.
func (s *stream) refuse(err error) {
	s.send(0, events.NewRunErrorEvent(err.Error(), events.WithErrorCode(Code(err))))
}

// Code is the RUN_ERROR code of err: "invalid_input",
// "unknown_interrupt", "interrupt_resolved", "interrupt_cancelled",
// "interrupt_expired", "invalid_payload", "run_in_progress", or
// "run_failed" for any other error of a run.
func Code(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{
		{ErrInvalidInput, "invalid_input"},
		{ErrUnknownInterrupt, "unknown_interrupt"},
		{instance.ErrUnknownSuspendID, "unknown_interrupt"},
		{ErrInterruptResolved, "interrupt_resolved"},
		{instance.ErrAlreadyResolved, "interrupt_resolved"},
		{ErrInterruptCancelled, "interrupt_cancelled"},
		{ErrInterruptExpired, "interrupt_expired"},
		{ErrInvalidPayload, "invalid_payload"},
		{instance.ErrPayloadDecode, "invalid_payload"},
		{ErrRunInProgress, "run_in_progress"},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "run_failed"
}

// follow streams thread's run from the event log after position after,
// until the run ends: RUN_STARTED, the state, the run's events, and
// RUN_FINISHED (or RUN_ERROR). lr is the run when this process runs it
// (nil otherwise: the stream ends at the run's last step, or at once
// when no run holds the machine). The run goes on when the client goes
// away.
func (h *Handler) follow(w http.ResponseWriter, r *http.Request, thread, runID string, after int64, lr *liveRun) {
	if lr != nil {
		defer lr.watched() // the run goes on without a stream
	}
	ctx, cancel := context.WithCancel(r.Context())
	var beats sync.WaitGroup
	defer beats.Wait() // no write after the handler returns
	defer cancel()
	s := newStream(w, h.heartbeat)
	beats.Go(func() { s.beat(ctx, h.heartbeat) })
	// RUN_STARTED carries the log position the stream starts from.
	s.sendID(strconv.FormatInt(after, 10), events.NewRunStartedEvent(thread, runID))
	t := &translator{h: h, s: s, thread: thread, prefix: rand.Text()[:10]}
	if err := t.snapshot(ctx); err != nil {
		t.fail(err)
		return
	}
	t.flush(0)
	// end is the log position at which the run is over, once known (-1
	// until then); cursor the position streamed.
	var end, cursor atomic.Int64
	end.Store(-1)
	cursor.Store(after)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	setEnd := func() {
		loaded, err := h.runner.LoadAt(ctx, thread)
		if err != nil {
			stopWatch()
			return
		}
		end.Store(loaded.EventSeq)
		if cursor.Load() >= loaded.EventSeq {
			stopWatch()
		}
	}
	if lr != nil {
		go func() {
			select {
			case <-lr.done:
				setEnd()
			case <-watchCtx.Done():
			}
		}()
	} else if busy, err := h.isBusy(ctx, thread); err != nil {
		t.fail(err)
		return
	} else if !busy {
		setEnd()
	}
	subscribed := watchCtx
	if lr != nil {
		// The run starts once the watch has subscribed: its first live
		// delta reaches the stream.
		subscribed = durable.WithSubscribed(watchCtx, lr.watched)
	}
	watch := h.runner.Watch(subscribed, thread, after)
	for e, err := range watch {
		if err != nil {
			if watchCtx.Err() != nil && ctx.Err() == nil {
				break // the run is over and streamed
			}
			t.fail(err)
			return
		}
		// An echo shows what was streamed live: it only moves the ID.
		if !e.Echo {
			if err := t.event(ctx, e); err != nil {
				t.fail(err)
				return
			}
		}
		t.flush(e.Seq)
		if e.Seq > 0 {
			cursor.Store(e.Seq)
		}
		if t.done || e.Seq > 0 && end.Load() >= 0 && e.Seq >= end.Load() {
			break
		}
	}
	if ctx.Err() != nil {
		return // the client went away
	}
	if lr != nil {
		<-lr.done
		if lr.err != nil {
			t.fail(lr.err)
			return
		}
	}
	t.finish(ctx, runID)
}

// translator turns a machine's durable events into AG-UI events.
type translator struct {
	h      *Handler
	s      *stream
	thread string
	// prefix and n make the stream's message IDs.
	prefix string
	n      int
	// step counts the rounds; inStep is set while one is open.
	step   int
	inStep bool
	// texts are the open text messages, by instance and content block.
	texts map[textKey]string
	// treeChanged is set when a transition, spawn or cede changed the
	// instance tree since the last state snapshot.
	treeChanged bool
	// done is set at the run's last step.
	done bool
	// out are the events made of one durable event, sent together.
	out []events.Event
}

// emit queues e to send.
func (t *translator) emit(e events.Event) { t.out = append(t.out, e) }

// flush sends the queued events, the last with the SSE id seq (when
// seq > 0): a client that reconnects with that ID has them all.
func (t *translator) flush(seq int64) {
	if len(t.out) == 0 && seq > 0 {
		t.s.moveID(seq)
	}
	for i, e := range t.out {
		if i == len(t.out)-1 {
			t.s.send(seq, e)
		} else {
			t.s.send(0, e)
		}
	}
	t.out = t.out[:0]
}

// State is the state document of a thread, as STATE_SNAPSHOT carries it
// and STATE_DELTA patches it.
type State struct {
	// Instances are the machine's instances, by instance ID.
	Instances map[string]InstanceState `json:"instances"`
	// Packs are the pack states, by pack name.
	Packs map[string]any `json:"packs"`
}

// InstanceState is one instance of a State.
type InstanceState struct {
	Node  string `json:"node"`
	State any    `json:"state"`
}

func (t *translator) id() string {
	t.n++
	return t.prefix + "-" + strconv.Itoa(t.n)
}

// snapshot sends the thread's whole state.
func (t *translator) snapshot(ctx context.Context) error {
	m, _, err := t.h.runner.Load(ctx, t.thread)
	if err != nil {
		return err
	}
	st := State{Instances: map[string]InstanceState{}, Packs: map[string]any{}}
	for in := range m.Root().Walk() {
		st.Instances[in.ID] = InstanceState{Node: in.Node, State: in.State}
	}
	for name, p := range m.Root().Packs {
		st.Packs[name] = p
	}
	// Typed states become JSON values, as the deltas carry them.
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	t.emit(events.NewStateSnapshotEvent(json.RawMessage(raw)))
	t.treeChanged = false
	return nil
}

// openStep starts a step when none is open.
func (t *translator) openStep() {
	if !t.inStep {
		t.step++
		t.inStep = true
		t.emit(events.NewStepStartedEvent("step " + strconv.Itoa(t.step)))
	}
}

// closeTexts ends the open text messages of instance id ("": all).
func (t *translator) closeTexts(id string) {
	for k, msg := range t.texts {
		if id == "" || k.instance == id {
			t.emit(events.NewTextMessageEndEvent(msg))
			delete(t.texts, k)
		}
	}
}

// textKey names a content block of an instance's reply.
type textKey struct {
	instance string
	block    int
}

// event sends the AG-UI events of e.
func (t *translator) event(ctx context.Context, e durable.Event) error {
	t.openStep()
	switch e.Kind {
	case machine.EventTextDelta:
		if e.Text == "" {
			return nil
		}
		if t.texts == nil {
			t.texts = map[textKey]string{}
		}
		k := textKey{e.InstanceID, e.Block}
		msg, ok := t.texts[k]
		if !ok {
			msg = t.id()
			t.texts[k] = msg
			t.emit(events.NewTextMessageStartEvent(msg, events.WithRole("assistant")))
		}
		t.emit(events.NewTextMessageContentEvent(msg, e.Text))
	case machine.EventToolStarted:
		t.closeTexts(e.InstanceID)
		t.emit(events.NewToolCallStartEvent(e.Tool.ToolUseID, e.Tool.Name))
		if len(e.Tool.Input) > 0 {
			t.emit(events.NewToolCallArgsEvent(e.Tool.ToolUseID, string(e.Tool.Input)))
		}
		t.emit(events.NewToolCallEndEvent(e.Tool.ToolUseID))
	case machine.EventToolFinished:
		if e.Tool.SuspendID == "" { // a suspended call's result comes with its resume
			t.emit(events.NewToolCallResultEvent(t.id(), e.Tool.ToolUseID, e.Tool.Result))
		}
	case machine.EventStateChanged:
		op := events.JSONPatchOperation{Op: "add", Path: "/instances/" + escape(e.InstanceID), Value: InstanceState{Node: e.Node, State: e.State}}
		if e.Pack != "" {
			op = events.JSONPatchOperation{Op: "add", Path: "/packs/" + escape(e.Pack), Value: e.State}
		}
		t.emit(events.NewStateDeltaEvent([]events.JSONPatchOperation{op}))
	case machine.EventTransition, machine.EventSpawn, machine.EventCede:
		t.treeChanged = true
	case machine.EventStep:
		return t.endStep(ctx, e)
	}
	return nil
}

// endStep closes the round of step event e: its open text messages, the
// results of the calls its resumes resolved, a new state snapshot when
// the tree changed, and STEP_FINISHED.
func (t *translator) endStep(ctx context.Context, e durable.Event) error {
	t.closeTexts("")
	for _, m := range e.Step.Messages {
		for _, p := range m.Parts {
			if p.Kind == message.KindToolResult && p.SuspendID != "" {
				t.emit(events.NewToolCallResultEvent(t.id(), p.ID, p.Text))
			}
		}
	}
	if t.treeChanged {
		if err := t.snapshot(ctx); err != nil {
			return err
		}
	}
	t.emit(events.NewStepFinishedEvent("step " + strconv.Itoa(t.step)))
	t.inStep = false
	t.done = e.Step.Done
	return nil
}

// closeAll ends what is open: text messages and the step.
func (t *translator) closeAll() {
	t.closeTexts("")
	if t.inStep {
		t.emit(events.NewStepFinishedEvent("step " + strconv.Itoa(t.step)))
		t.inStep = false
	}
}

// fail ends the stream with the RUN_ERROR of err.
func (t *translator) fail(err error) {
	t.closeAll()
	t.flush(0)
	t.s.refuse(err)
}

// finish ends the stream with RUN_FINISHED: an interrupt outcome with
// the thread's pending suspensions, or success.
func (t *translator) finish(ctx context.Context, runID string) {
	t.closeAll()
	t.flush(0)
	reqs, err := t.h.bridge.Requests(ctx, t.thread)
	if err != nil {
		t.s.refuse(err)
		return
	}
	outcome := events.WithSuccessOutcome()
	if len(reqs) > 0 {
		outcome = events.WithInterruptOutcome(interrupts(reqs))
	}
	t.s.send(0, events.NewRunFinishedEventWithOptions(t.thread, runID, outcome))
}

// interrupts are the AG-UI interrupts of reqs: the ID is the suspend ID,
// the reason the call's kind ("tool_call", "command" or "suspended"),
// the message the suspension's reason, the schema its payload schema,
// the metadata its metadata when that is a JSON object.
func interrupts(reqs []bridge.Request) []types.Interrupt {
	out := make([]types.Interrupt, 0, len(reqs))
	for _, r := range reqs {
		in := types.Interrupt{ID: r.SuspendID, Reason: reasonOf(r.Kind), Message: r.Reason, ToolCallID: r.ToolUseID}
		if len(r.Schema) > 0 {
			_ = json.Unmarshal(r.Schema, &in.ResponseSchema) // a schema that is no object is left out
		}
		if len(r.Metadata) > 0 {
			_ = json.Unmarshal(r.Metadata, &in.Metadata) // metadata that is no object is left out
		}
		if !r.Deadline.IsZero() {
			in.ExpiresAt = r.Deadline.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, in)
	}
	return out
}

// reasonOf is the interrupt reason of a suspended call of kind.
func reasonOf(kind string) string {
	switch instance.CallKind(kind) {
	case instance.KindTool:
		return "tool_call"
	case instance.KindCommand:
		return "command"
	}
	return "suspended"
}
