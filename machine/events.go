package machine

import (
	"context"
	"iter"
	"time"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
)

// EventKind names the kind of an [Event]: a stable string, fit for a log.
type EventKind string

// The kinds of event. The first four come from a leaf's step as it runs
// (see executor.Event); the others from what the machine applied.
const (
	// EventTextDelta: Text is the next piece of a leaf's reply text, in
	// content block Block.
	EventTextDelta = EventKind(executor.EventTextDelta)
	// EventThinkingDelta: Text is the next piece of a leaf's thinking, in
	// content block Block.
	EventThinkingDelta = EventKind(executor.EventThinkingDelta)
	// EventToolStarted: a leaf's tool call Tool starts.
	EventToolStarted = EventKind(executor.EventToolStarted)
	// EventToolFinished: a leaf's tool call Tool returned: its result, or
	// its SuspendID when it suspended.
	EventToolFinished = EventKind(executor.EventToolFinished)
	// EventSuspended: a call suspended; Lifecycle is its event and Call
	// the full record.
	EventSuspended = EventKind(instance.EventSuspended)
	// EventResumed: a suspension was resolved with a result; Lifecycle
	// carries the cause and the initiator of the call.
	EventResumed = EventKind(instance.EventResumed)
	// EventExpired: a suspension's deadline passed; Lifecycle as above.
	EventExpired = EventKind(instance.EventExpired)
	// EventCancelled: a suspension was cancelled; Lifecycle as above.
	EventCancelled = EventKind(instance.EventCancelled)
	// EventEscalated: a governed call's deadline passed and its policy's
	// escalation re-asks it under another policy with a new deadline;
	// Lifecycle as above. The call stays pending.
	EventEscalated = EventKind(instance.EventEscalated)
	// EventReminded: a governed call's reminder came before its deadline
	// (instance.Policy.Remind); Lifecycle as above. The call stays
	// pending.
	EventReminded = EventKind(instance.EventReminded)
	// EventStateChanged: the state of instance InstanceID, or of pack
	// Pack, is now State.
	EventStateChanged EventKind = "state_changed"
	// EventTransition: instance InstanceID moved to node Effect.Target
	// with state Effect.State.
	EventTransition EventKind = "transition"
	// EventSpawn: instance InstanceID spawned Effect.Children.
	EventSpawn EventKind = "spawn"
	// EventCede: instance InstanceID ceded Cede.Content to its parent and
	// left the tree.
	EventCede EventKind = "cede"
	// EventStep: the step boundary; Step is what Run yields.
	EventStep EventKind = "step"
)

// Event is one thing that happened in a run, as [Machine.Events] yields
// it. Which fields are set depends on Kind. Events are plain data: they
// hold copies, never the machine's own tree.
type Event struct {
	Kind EventKind `json:"kind"`
	// InstanceID and Node name the instance the event is about (the
	// leaf, for leaf events).
	InstanceID string `json:"instance_id,omitempty"`
	Node       string `json:"node,omitempty"`
	// Block and Text are a delta's content block index and text.
	Block int    `json:"block,omitempty"`
	Text  string `json:"text,omitempty"`
	// Tool is the call of a tool event.
	Tool *executor.ToolCall `json:"tool,omitempty"`
	// Lifecycle is the suspension lifecycle event of EventSuspended,
	// EventResumed, EventExpired and EventCancelled.
	Lifecycle *instance.Event `json:"lifecycle,omitempty"`
	// Call is the suspended call of EventSuspended.
	Call *instance.SuspendedCall `json:"call,omitempty"`
	// Pack names the pack of a pack's EventStateChanged.
	Pack string `json:"pack,omitempty"`
	// State is the new state of EventStateChanged.
	State any `json:"state,omitempty"`
	// Effect is the transition of EventTransition and EventSpawn.
	Effect *instance.Effect `json:"effect,omitempty"`
	// Cede is the cede of EventCede.
	Cede *Ceded `json:"cede,omitempty"`
	// Step is the step of EventStep.
	Step *Step `json:"step,omitempty"`
}

// Events runs the machine as [Machine.Run] does — the same inputs, the same
// rounds, the same contract — and yields what happens as it happens:
// within a round, each leaf's text and thinking deltas as the model
// streams them (a model that does not implement llm.Streamer gives one
// delta per content block) and its tool calls as they start and finish;
// then what the round applied: state changes, transitions and spawns in
// the order applied, the suspension lifecycle events (Step.Events), the
// cedes; last, an EventStep carrying the Step that Run would yield. Events
// of leaves that step in parallel, and of tools that run in parallel,
// interleave; each names its leaf and tool-use ID. The inputs are applied
// together before any step, so the state changes, transitions and spawns
// of all of them come before the first step (a command's), and the
// lifecycle events of resumes, cancels and expiries before the first
// round.
//
// An error is yielded once as (Event{}, err) and the sequence ends; a
// model error mid-stream fails the round and changes nothing, as in Run.
// Breaking out of the loop at an EventStep leaves the machine at that
// step boundary; breaking out within a round abandons the round (its
// model calls and tools are cancelled and awaited) and changes nothing,
// like cancelling ctx. The sequence is single-use, like Run's.
func (m *Machine) Events(ctx context.Context, inputs ...Input) iter.Seq2[Event, error] {
	return sequence(m, func(yield func(Event, error) bool) {
		l := &listener{yield: yield}
		m.listener = l
		defer func() { m.listener = nil }()
		m.run(ctx, inputs, l.step)
	})
}

// ApplyEvents is [Machine.Apply] returning, instead of the command steps,
// what [Machine.Events] would yield for applying inputs, in the same order:
// the state changes, transitions and spawns the inputs made (resume
// handlers and commands), then for each command step its lifecycle events
// (a command's Context.Resume), its cedes and an EventStep carrying it. A
// run of Events with no inputs afterwards yields the rest — the lifecycle
// events of the resumes, cancels and expiries, then the rounds — so that
// ApplyEvents followed by Events yields exactly what Events with the
// inputs yields. Durable runners use it to save what the inputs did before
// any model call, and still report every event. The errors are Apply's;
// on an error nothing is applied and no event is returned.
func (m *Machine) ApplyEvents(ctx context.Context, inputs ...Input) ([]Event, error) {
	return m.collect(func() ([]Step, error) { return m.apply(ctx, inputs) })
}

// ExpireEvents is [Machine.Expire] returning what [Machine.Events] would
// yield for the expiry, as ApplyEvents does for inputs: the state changes
// of on-timeout resume handlers, and an EventStep (after its lifecycle
// event) for each expired command suspension; Events with no inputs
// afterwards yields the other lifecycle events, then the rounds. A
// coordinator whose clock decides deadlines (package durable's Hold.Expire)
// calls it with that clock's now.
func (m *Machine) ExpireEvents(now time.Time) ([]Event, error) {
	return m.collect(func() ([]Step, error) {
		steps, _ := m.expire(now)
		return steps, nil
	})
}

// collect runs apply, which applies inputs or expiries and returns their
// command steps, with m marked running and a listener collecting what
// Events would yield for them.
func (m *Machine) collect(apply func() ([]Step, error)) ([]Event, error) {
	if !m.running.CompareAndSwap(false, true) {
		return nil, ErrRunning
	}
	defer m.running.Store(false)
	var events []Event
	l := &listener{yield: func(e Event, _ error) bool {
		events = append(events, e)
		return true
	}}
	m.listener = l
	defer func() { m.listener = nil }()
	steps, err := apply()
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		l.step(s, nil)
	}
	l.flush() // with no command step, what resumes and expiries changed
	return events, nil
}

// listener hands a run's events to the caller of Events, on the caller's
// goroutine.
type listener struct {
	yield   func(Event, error) bool
	stopped bool // the caller broke out of the loop
	// trail holds the events of what the machine applied since the last
	// step: state changes, transitions, spawns.
	trail []Event
	// events and cedes count the lifecycle events and cedes at the start
	// of the next step that were yielded before it (see inputs).
	events, cedes int
}

// emit yields e unless the caller has stopped; false when it has.
func (l *listener) emit(e Event, err error) bool {
	if l.stopped {
		return false
	}
	if !l.yield(e, err) {
		l.stopped = true
	}
	return !l.stopped
}

// step yields what step s applied and then s; it is the run's yield.
func (l *listener) step(s Step, err error) bool {
	if err != nil {
		l.trail = nil // of inputs that failed to apply
		return l.emit(Event{}, err)
	}
	if !l.flush() {
		return false
	}
	if s.Reason == Replied {
		// A checkpoint reports nothing: what the inputs applied comes
		// with the round's step.
		return l.emit(Event{Kind: EventStep, Step: &s}, nil)
	}
	events, cedes := s.Events[min(l.events, len(s.Events)):], s.Cedes[min(l.cedes, len(s.Cedes)):]
	l.events, l.cedes = 0, 0
	if !l.reported(s.Root, events, cedes) {
		return false
	}
	return l.emit(Event{Kind: EventStep, Step: &s}, nil)
}

// announceInputs yields what the inputs of an Events run applied before
// its first round (see listener.inputs); false when the caller stopped.
func (m *Machine) announceInputs() bool {
	return m.listener == nil || m.listener.inputs(m.root, m.unreported)
}

// inputs yields what the run's inputs applied (resumes, cancels,
// expiries), and what an Apply before the run did, in r, before the first
// round, which reports them in its step; false when the caller stopped.
func (l *listener) inputs(root *instance.Instance, r *report) bool {
	if !l.flush() {
		return false
	}
	if r.empty() {
		return true
	}
	l.events, l.cedes = len(r.events), len(r.cedes)
	return l.reported(root, r.events, r.cedes)
}

// flush yields the trail; false when the caller stopped.
func (l *listener) flush() bool {
	trail := l.trail
	l.trail = nil
	for _, e := range trail {
		if !l.emit(e, nil) {
			return false
		}
	}
	return true
}

// reported yields lifecycle events and cedes; false when the caller
// stopped.
func (l *listener) reported(root *instance.Instance, events []instance.Event, cedes []Ceded) bool {
	for i := range events {
		if !l.emit(lifecycleEvent(root, events[i]), nil) {
			return false
		}
	}
	for _, c := range cedes {
		if !l.emit(Event{Kind: EventCede, InstanceID: c.InstanceID, Node: c.Node, Cede: &c}, nil) {
			return false
		}
	}
	return true
}

// lifecycleEvent is the event of lifecycle event ev in the tree of root; a
// suspension carries a copy of its call.
func lifecycleEvent(root *instance.Instance, ev instance.Event) Event {
	e := Event{Kind: EventKind(ev.Type), InstanceID: ev.InstanceID, Lifecycle: &ev}
	if in := root.Find(ev.InstanceID); in != nil {
		e.Node = in.Node
	}
	if ev.Type == instance.EventSuspended {
		if _, c := root.FindCall(ev.SuspendID); c != nil {
			call := c.Clone()
			e.Call = &call
		}
	}
	return e
}

// stepLeaves runs the executor steps of a round; while someone listens, it
// yields their events as they come, and a caller who stops listening
// cancels the round.
func (m *Machine) stepLeaves(ctx context.Context, reqs []executor.StepRequest) ([]*executor.StepResult, error) {
	l := m.listener
	if l == nil {
		return m.stepAll(ctx, reqs)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan executor.Event, 8)
	sink := func(e executor.Event) {
		select {
		case events <- e:
		case <-ctx.Done():
		}
	}
	for i := range reqs {
		reqs[i].Events = sink
	}
	var results []*executor.StepResult
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		results, err = m.stepAll(ctx, reqs)
	}()
	for {
		select {
		case e := <-events:
			if !l.emit(leafEvent(e), nil) {
				cancel()
				<-done
				return nil, errStopped
			}
		case <-done:
			// Every send has finished: what is buffered is the rest.
			for {
				select {
				case e := <-events:
					if !l.emit(leafEvent(e), nil) {
						return nil, errStopped
					}
				default:
					return results, err
				}
			}
		}
	}
}

// leafEvent is the machine event of a leaf's step event.
func leafEvent(e executor.Event) Event {
	return Event{Kind: EventKind(e.Kind), InstanceID: e.InstanceID, Node: e.Node, Block: e.Block, Text: e.Text, Tool: e.Tool}
}

// note records e for the listener to yield before the next step; callers
// note only while someone listens.
func (t *tx) note(e Event) { t.m.listener.trail = append(t.m.listener.trail, e) }

// noteState records a state change of instance in, when someone listens.
func (t *tx) noteState(in *instance.Instance, state any) {
	if t.m.listener != nil {
		t.note(Event{Kind: EventStateChanged, InstanceID: in.ID, Node: in.Node, State: t.m.charter.cloneState(in.Node, state)})
	}
}

// notePack records a state change of pack name, when someone listens.
func (t *tx) notePack(name string, state any) {
	if t.m.listener != nil {
		t.note(Event{Kind: EventStateChanged, Pack: name, State: t.m.charter.cloneState(instance.PackStateKey+name, state)})
	}
}

// noteEffect records the transition or spawn eff of instance in, when
// someone listens.
func (t *tx) noteEffect(in *instance.Instance, eff instance.Effect) {
	if t.m.listener == nil {
		return
	}
	kind := EventTransition
	if eff.Kind == instance.EffectSpawn {
		kind = EventSpawn
		eff.Children = append([]instance.Child(nil), eff.Children...)
	}
	eff.State = t.m.charter.cloneState(eff.Target, eff.State)
	t.note(Event{Kind: kind, InstanceID: in.ID, Node: in.Node, Effect: &eff})
}
