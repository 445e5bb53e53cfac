package machine

// This file is effect application: the only code that writes the fields
// of instances (a round's outcomes, a transaction's effects, resolved
// suspensions). Input application (inputs.go) and the round loop
// (run.go) decide; they change the tree through these methods.

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/internal/tracing"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// applyOutcome applies the step result o of leaf in to the tree.
func (t *tx) applyOutcome(o *executor.StepResult, in *instance.Instance) reasonFlags {
	if in.Reply != nil {
		in.Reply = nil // continued: a Replied step reported its usage
	} else {
		t.usage = t.usage.Add(o.Reply.Usage)
	}
	if o.StateChanged {
		t.setState(in, o.State)
	}
	for k, v := range o.Packs {
		t.setPack(k, v)
	}
	reply := o.Reply.Message
	if o.Reply.Stop == llm.MaxTokens {
		in.MaxTokensStreak++
		reply.Source.To = t.scope(in)
		t.add(reply)
		if in.MaxTokensStreak >= 2 {
			in.Idle, in.MaxTokensStreak = true, 0
		}
		return reasonFlags{maxTokens: true}
	}
	in.MaxTokensStreak = 0
	if len(o.Results) == 0 {
		reply.Source.To = t.scope(in)
		t.add(reply)
		in.Idle = o.Reply.Stop != llm.PauseTurn
		return reasonFlags{}
	}
	reply.Source.To = in.ID
	flags := reasonFlags{toolUse: true}
	if len(o.Suspended) > 0 {
		flags.suspend = true
		t.suspended(in, o.Suspended...)
	}
	if o.HoldsReply() {
		t.held = append(t.held, reply)
		in.Suspension.Reply = &instance.HeldReply{
			Message:    reply,
			Results:    o.Results,
			Transition: o.Transition,
			Terminal:   o.Terminal,
		}
		return flags
	}
	t.addExchange(in, reply, o.Results)
	in.Idle = o.Terminal
	if o.Transition != nil {
		if t.applyEffect(in, *o.Transition, !o.Terminal) {
			flags.cede = true
		}
	}
	return flags
}

// recordReply records r on in as its reply in flight (checkpoint mode).
func recordReply(in *instance.Instance, r executor.Reply) { in.Reply = &r }

// scope returns the To of a leaf's text reply: the primary speaks to the
// shared conversation, workers only to themselves.
func (t *tx) scope(in *instance.Instance) string {
	if t.nodes[in.Node].Worker() {
		return in.ID
	}
	return ""
}

// addExchange appends an assistant message and its tool results.
func (t *tx) addExchange(in *instance.Instance, reply message.Message, results []message.Part) {
	t.added = append(t.added, reply, message.Message{
		Role:   message.Tool,
		Parts:  results,
		Source: message.Source{InstanceID: in.ID, Node: in.Node, To: in.ID},
	})
}

// applyEffect applies a validated transition to in. With wake (a model's
// goto, without a terminal tool in the same reply) the turn goes on on the
// new node; otherwise (a command's, or the turn ended) the instance stays
// as idle as it was. It reports a cede.
func (t *tx) applyEffect(in *instance.Instance, eff instance.Effect, wake bool) bool {
	switch eff.Kind {
	case instance.EffectGoto:
		t.noteEffect(in, eff)
		in.Node, in.State = eff.Target, eff.State
		if wake {
			in.Idle = false
		}
	case instance.EffectSpawn:
		t.noteEffect(in, eff)
		for _, c := range eff.Children {
			in.Children = append(in.Children, &instance.Instance{ID: c.ID, Node: c.Node, State: c.State})
		}
	case instance.EffectCede:
		path := t.root.Path(in.ID)
		if len(path) < 2 {
			return false
		}
		parent := path[len(path)-2]
		for i, c := range parent.Children {
			if c == in {
				parent.Children = append(parent.Children[:i:i], parent.Children[i+1:]...)
				break
			}
		}
		for gone := range in.Walk() {
			t.removed = append(t.removed, gone.ID)
		}
		text, _ := instance.ResultText(eff.Content)
		t.add(message.Message{
			Role:   message.User,
			Parts:  []message.Part{message.Text(text)},
			Source: message.Source{InstanceID: in.ID, Node: in.Node, To: parent.ID},
		})
		parent.Idle = false
		t.cedes = append(t.cedes, Ceded{InstanceID: in.ID, Node: in.Node, To: parent.ID, Content: eff.Content})
		return true
	}
	return false
}

// suspended records new suspended calls on in. Each remembers the span
// of its suspension (TraceParent), for the span link of the run that
// resolves it.
func (t *tx) suspended(in *instance.Instance, calls ...instance.SuspendedCall) {
	for i := range calls {
		c := &calls[i]
		_, span := tracing.Start(t.ctx, t.tracer, "markov.suspend")
		if span.IsRecording() {
			span.SetAttributes(attribute.String("markov.suspend_id", c.SuspendID), attribute.String("markov.instance", c.InstanceID),
				attribute.String("markov.kind", string(c.Kind)), attribute.String("markov.name", c.Name),
				attribute.String("markov.reason", c.Reason))
		}
		if tp := telemetry.TraceParent(span.SpanContext()); tp != "" {
			c.TraceParent = tp
		}
		span.End()
		t.asked = append(t.asked, c.SuspendID)
		t.events = append(t.events, instance.Event{
			Type: instance.EventSuspended, SuspendID: c.SuspendID, InstanceID: c.InstanceID,
			Kind: c.Kind, Name: c.Name, Initiator: c.Initiator, Reason: c.Reason, At: c.SuspendedAt,
		})
	}
	addCalls(in, calls...)
}

func addCalls(in *instance.Instance, calls ...instance.SuspendedCall) {
	if in.Suspension == nil {
		in.Suspension = &instance.SuspensionState{}
	}
	in.Suspension.Calls = append(in.Suspension.Calls, calls...)
}

// fillSlot puts a tool result into the held reply's slot for its tool use.
func (t *tx) fillSlot(in *instance.Instance, part message.Part) {
	r := in.Suspension.Reply
	if r == nil {
		return
	}
	for i, u := range r.Message.ToolUses() {
		if u.ID == part.ID {
			r.Results[i] = part
			return
		}
	}
}

// finish drops a suspension with nothing pending and releases its held
// reply: the assistant message and every result enter history together,
// then the held transition applies, then the user input deferred behind
// the reply enters history (and, unless silent, starts a new turn of the
// primary leaf, even after a terminal tool).
func (t *tx) finish(in *instance.Instance) {
	s := in.Suspension
	if s == nil || s.PendingCount() > 0 {
		return
	}
	in.Suspension = nil
	r := s.Reply
	if r == nil {
		return
	}
	t.addExchange(in, r.Message, r.Results)
	in.Idle = r.Terminal
	if r.Transition != nil {
		t.applyEffect(in, *r.Transition, !r.Terminal)
	}
	for _, msg := range r.Deferred {
		t.add(msg)
		t.wake(msg)
	}
}

// wake starts a turn of the primary leaf for user input msg, unless msg
// is silent.
func (t *tx) wake(msg message.Message) {
	if l := t.primaryLeaf(); l != nil && !msg.Silent {
		l.Idle = false
	}
}

// setState replaces the state of in.
func (t *tx) setState(in *instance.Instance, s any) {
	in.State = s
	t.noteState(in, s)
}

// setPack replaces the state of pack name on the root.
func (t *tx) setPack(name string, s any) {
	t.root.Packs[name] = s
	t.notePack(name, s)
}

// applyCommand applies what command result co wrote: its instance's
// state, or a pack's.
func (t *tx) applyCommand(in *instance.Instance, co *executor.CommandResult) {
	if co.StateChanged {
		t.setState(in, co.State)
	}
	if co.Pack != "" {
		t.setPack(co.Pack, co.PackState)
	}
}

// markCall moves call out of pending with mark (resolve, cancel, expire).
func (t *tx) markCall(call *instance.SuspendedCall, mark func(*instance.SuspendedCall) error) error {
	return mark(call)
}

// deferInput keeps user input msg behind the held reply of l, to enter
// history after the reply and its results.
func (t *tx) deferInput(l *instance.Instance, msg message.Message) {
	r := l.Suspension.Reply
	r.Deferred = append(r.Deferred, msg.Clone())
}

// wakeInstance gives in a turn.
func (t *tx) wakeInstance(in *instance.Instance) { in.Idle = false }
