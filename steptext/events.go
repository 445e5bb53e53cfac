package steptext

import (
	"io"
	"iter"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
)

// EventWriter writes a run's events (machine.Event, from Machine.Events or
// a durable watcher) as they happen: text and thinking deltas inline, as
// they arrive, on a line per content block ("assistant: …", "assistant
// thinks: …"); a line when a tool call starts and one when it finishes;
// suspensions (the pending call, as WriteCall writes it) and what became
// of them; state changes, transitions, spawns and cedes; and at each step
// boundary the "[step: …]" line and a command's result (a checkpoint step,
// machine.Replied, writes nothing). The step's messages are not written
// again: their text came as deltas. It is not
// safe for concurrent use.
type EventWriter struct {
	p printer
	// open is the content block whose line is being written, if any.
	open    blockLine
	hasOpen bool
}

// blockLine names a content block of a leaf's reply.
type blockLine struct {
	kind     machine.EventKind
	instance string
	block    int
}

// NewEventWriter returns an EventWriter writing to w.
func NewEventWriter(w io.Writer) *EventWriter { return &EventWriter{p: printer{w: w}} }

// WriteEvents writes every event of events with an EventWriter and returns
// the last step (the zero Step when there was none) and the first error:
// the sequence's, or the writer's. It stops at the first error.
func WriteEvents(w io.Writer, events iter.Seq2[machine.Event, error]) (machine.Step, error) {
	ew := NewEventWriter(w)
	var last machine.Step
	for e, err := range events {
		if err != nil {
			ew.EndLine()
			return last, err
		}
		if err := ew.Write(e); err != nil {
			return last, err
		}
		if e.Kind == machine.EventStep && e.Step != nil {
			last = *e.Step
		}
	}
	return last, ew.EndLine()
}

// Write writes one event and returns the writer's first error.
func (ew *EventWriter) Write(e machine.Event) error {
	p := &ew.p
	if e.Kind == machine.EventTextDelta || e.Kind == machine.EventThinkingDelta {
		ew.delta(e)
		return p.err
	}
	ew.EndLine()
	switch e.Kind {
	case machine.EventToolStarted:
		p.printf("→ %s %s\n", e.Tool.Name, e.Tool.Input)
	case machine.EventToolFinished:
		ew.toolFinished(e)
	case machine.EventSuspended, machine.EventResumed, machine.EventExpired, machine.EventCancelled:
		ew.suspension(e)
	case machine.EventStep:
		if e.Step.Reason == machine.Replied {
			break // a checkpoint: the reply came as deltas, its tools come next
		}
		p.printf("[step: %s, done: %v]\n", e.Step.Reason, e.Step.Done)
		if e.Step.Command != nil {
			p.printf("command result: %s\n", jsonText(e.Step.Command))
		}
	default:
		ew.tree(e)
	}
	return p.err
}

// suspension writes a suspension lifecycle event: the pending call of a
// suspension, a line for the others.
func (ew *EventWriter) suspension(e machine.Event) {
	switch {
	case e.Kind == machine.EventSuspended && e.Call != nil:
		ew.p.err = cmpErr(ew.p.err, WriteCall(ew.p.w, *e.Call))
	case e.Lifecycle != nil:
		ew.p.lifecycle(*e.Lifecycle)
	}
}

// cmpErr is the first of two errors.
func cmpErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// tree writes what an event did to the tree: a state change, a
// transition, a spawn, a cede.
func (ew *EventWriter) tree(e machine.Event) {
	p := &ew.p
	switch e.Kind {
	case machine.EventStateChanged:
		if e.Pack != "" {
			p.printf("pack %s state: %s\n", e.Pack, jsonText(e.State))
		} else {
			p.printf("state of %s (%s): %s\n", e.Node, e.InstanceID, jsonText(e.State))
		}
	case machine.EventTransition:
		p.printf("%s (%s) → %s %s\n", e.Node, e.InstanceID, e.Effect.Target, jsonText(e.Effect.State))
	case machine.EventSpawn:
		p.printf("%s (%s) spawns %s\n", e.Node, e.InstanceID, jsonText(e.Effect.Children))
	case machine.EventCede:
		p.printf("%s (%s) cedes to %s: %s\n", e.Node, e.InstanceID, e.Cede.To, jsonText(e.Cede.Content))
	}
}

// EndLine ends the line of a content block being written, if any, and
// returns the writer's first error. Call it before writing anything else
// to the writer between events.
func (ew *EventWriter) EndLine() error {
	if ew.hasOpen {
		ew.p.printf("\n")
		ew.hasOpen = false
	}
	return ew.p.err
}

// delta writes a text or thinking delta, opening its block's line first
// when another one is open.
func (ew *EventWriter) delta(e machine.Event) {
	b := blockLine{kind: e.Kind, instance: e.InstanceID, block: e.Block}
	if ew.hasOpen && ew.open == b {
		ew.p.printf("%s", e.Text)
		return
	}
	ew.EndLine()
	verb := ":"
	if e.Kind == machine.EventThinkingDelta {
		verb = " thinks:"
	}
	ew.p.printf("assistant%s %s", verb, e.Text)
	ew.open, ew.hasOpen = b, true
}

// toolFinished writes the end of a tool call: its result, its error, or
// its suspension.
func (ew *EventWriter) toolFinished(e machine.Event) {
	t := e.Tool
	switch {
	case t.SuspendID != "":
		ew.p.printf("← %s suspended (%s)\n", t.Name, t.SuspendID)
	case t.IsError:
		ew.p.printf("← %s error: %s\n", t.Name, OneLine(t.Result, 500))
	default:
		ew.p.printf("← %s: %s\n", t.Name, OneLine(t.Result, 500))
	}
}

// lifecycle writes a suspension lifecycle event: "suspension ID TYPE
// (KIND NAME)".
func (p *printer) lifecycle(ev instance.Event) {
	p.printf("suspension %s %s (%s %s)\n", ev.SuspendID, ev.Type, ev.Kind, ev.Name)
}
