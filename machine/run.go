package machine

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/tracing"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Run applies inputs in order — user messages to history, commands
// executed, resumes applied — and then runs rounds until no leaf has work,
// yielding one Step per command and per round. All inputs are validated
// and applied as one: if any fails, Run yields the error and the machine is
// exactly as it was.
//
// Iterator contract: an error is yielded once as (Step{}, err) and the
// sequence ends. Breaking out of the loop leaves the machine at a step
// boundary; Run again with no inputs continues. Every goroutine a round
// starts is joined before its step is yielded. Cancelling ctx stops the
// run with ctx.Err() and discards the unfinished round; a ctx already
// cancelled when the run starts applies none of the inputs.
//
// The sequence is single-use: it applies its inputs when first ranged
// over, and ranging over it again yields ErrIterReused once and changes
// nothing. Call Run again to continue.
func (m *Machine) Run(ctx context.Context, inputs ...Input) iter.Seq2[Step, error] {
	var used atomic.Bool
	return func(yield func(Step, error) bool) {
		if !m.running.CompareAndSwap(false, true) {
			yield(Step{}, ErrRunning)
			return
		}
		defer m.running.Store(false)
		if used.Swap(true) {
			yield(Step{}, ErrIterReused)
			return
		}
		m.run(ctx, inputs, yield)
	}
}

func (m *Machine) run(ctx context.Context, inputs []Input, yield func(Step, error) bool) {
	if err := ctx.Err(); err != nil {
		yield(Step{}, err)
		return
	}
	ctx, span := m.charter.tracer.Start(ctx, "markov.run")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.root", m.root.ID), attribute.Int("markov.inputs", len(inputs)))
	}
	defer span.End()
	ctx = tracing.Run(ctx, span)
	yield = traced(span, yield)
	log := m.charter.logger
	log.LogAttrs(ctx, slog.LevelDebug, "run", slog.String("root", m.root.ID), slog.Int("inputs", len(inputs)))
	pre, carry, err := m.applyInputs(ctx, inputs)
	if err != nil {
		yield(Step{}, err)
		return
	}
	// What the inputs did stays unreported on the machine until a step
	// carries it: a round that fails leaves it to the next Run.
	m.unreported = m.unreported.merge(carry)
	emit := func(s Step) bool {
		m.finishStep(&s)
		m.atBoundary.Store(true)
		defer m.atBoundary.Store(false)
		return yield(s, nil)
	}
	for i, s := range pre {
		s.Done = i == len(pre)-1 && !m.hasWork() && m.unreported.empty()
		if !emit(s) || s.Done {
			return
		}
	}
	for round := 0; m.hasWork(); round++ {
		if err := ctx.Err(); err != nil {
			yield(Step{}, err)
			return
		}
		if round >= m.charter.maxSteps {
			yield(Step{}, fmt.Errorf("%w: %d rounds", ErrMaxSteps, round))
			return
		}
		step, err := m.round(ctx, m.unreported)
		if err != nil {
			yield(Step{}, err)
			return
		}
		m.unreported = nil
		step.Done = !m.hasWork()
		if !emit(step) || step.Done {
			return
		}
	}
	// No step said Done: either none ran, or the caller suspended the
	// primary leaf at the last step boundary.
	switch {
	case !m.unreported.empty():
		s := m.newTx(ctx, m.root, m.unreported).step(EndTurn)
		m.unreported = nil
		if len(m.Pending()) > 0 {
			s.Reason = AwaitingResume
		}
		s.Done = true
		emit(s)
	case len(m.Pending()) > 0:
		emit(Step{Reason: AwaitingResume, Done: true})
	}
}

// traced records the error a run yields on its span.
func traced(span trace.Span, yield func(Step, error) bool) func(Step, error) bool {
	return func(s Step, err error) bool {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return yield(s, err)
	}
}

// hasWork reports whether any leaf can run.
func (m *Machine) hasWork() bool {
	for l := range m.root.Leaves() {
		if active(l) {
			return true
		}
	}
	return false
}

func active(l *instance.Instance) bool { return !l.Idle && !l.Suspended() }

// Apply applies inputs as Run does — validated together, all or nothing —
// but runs no round: it returns the command steps, and the next Run
// continues from there (reporting what the inputs added in its first
// step). Durable runners apply, persist, then run, so that two processes
// racing to resume the same suspension conflict before any model call. A
// cancelled ctx applies nothing and returns ctx.Err().
func (m *Machine) Apply(ctx context.Context, inputs ...Input) ([]Step, error) {
	if !m.running.CompareAndSwap(false, true) {
		return nil, ErrRunning
	}
	defer m.running.Store(false)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pre, carry, err := m.applyInputs(ctx, inputs)
	if err != nil {
		return nil, err
	}
	m.unreported = m.unreported.merge(carry)
	for i := range pre {
		pre[i].Done = i == len(pre)-1 && !m.hasWork() && m.unreported.empty()
		m.finishStep(&pre[i])
	}
	return pre, nil
}

// finishStep adds the snapshots every yielded step carries.
func (m *Machine) finishStep(s *Step) {
	if s.Done || s.Reason == Suspend || s.Reason == AwaitingResume {
		s.Suspensions = m.Pending()
	}
	s.Root = m.Root()
}

// round runs every active leaf once, concurrently, and applies their
// outcomes in leaf order.
func (m *Machine) round(ctx context.Context, carry *report) (Step, error) {
	ctx, span := tracing.Start(ctx, m.charter.tracer, "markov.step")
	defer span.End()
	var reqs []executor.StepRequest
	primaries := 0
	for l := range m.root.Leaves() {
		if !m.charter.Node(l.Node).Worker() {
			primaries++
		}
		if active(l) {
			reqs = append(reqs, executor.StepRequest{Root: m.root, Instance: l, Transcript: m.transcript(l.ID, m.cache(l.ID))})
		}
	}
	if primaries > 1 {
		return Step{}, fmt.Errorf("%w: %d non-worker leaves", executor.ErrPrimaryConflict, primaries)
	}
	results, err := m.stepAll(ctx, reqs)
	if cerr := ctx.Err(); cerr != nil {
		return Step{}, cerr
	}
	if err != nil {
		return Step{}, err
	}
	t := m.newTx(ctx, m.root, carry)
	flags := reasonFlags{}
	for i, r := range results {
		flags = flags.merge(t.applyOutcome(r, reqs[i].Instance))
	}
	m.commit(t)
	s := t.step(flags.reason())
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("markov.leaves", len(reqs)), attribute.String("markov.reason", string(s.Reason)))
	}
	return s, nil
}

// stepAll runs the executor steps of the leaves, concurrently when there
// are several, and returns their results, or the first error in leaf
// order.
func (m *Machine) stepAll(ctx context.Context, reqs []executor.StepRequest) ([]*executor.StepResult, error) {
	results := make([]*executor.StepResult, len(reqs))
	if len(reqs) == 1 {
		var err error
		results[0], err = m.charter.exec.Step(ctx, &reqs[0])
		return results, err
	}
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { results[i], errs[i] = m.charter.exec.Step(ctx, &reqs[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// idTaken reports an instance or suspend ID in use in the tree of root.
func idTaken(root *instance.Instance, id string) bool {
	if root.Find(id) != nil {
		return true
	}
	_, c := root.FindCall(id)
	return c != nil
}

// cache returns the leaf cache of instance id.
func (m *Machine) cache(id string) *leafCache {
	c := m.leaves[id]
	if c == nil {
		c = &leafCache{}
		m.leaves[id] = c
	}
	return c
}

// transcript brings the leaf's transcript up to date with history and
// returns it, capped so no one can append into it.
func (m *Machine) transcript(id string, c *leafCache) []message.Message {
	for ; c.next < len(m.history); c.next++ {
		if h := &m.history[c.next]; h.VisibleTo(id) {
			c.transcript = append(c.transcript, *h)
		}
	}
	return c.transcript[:len(c.transcript):len(c.transcript)]
}

// commit appends a transaction's messages to history and forgets the
// caches of instances that left the tree.
func (m *Machine) commit(t *tx) {
	m.root = t.root
	m.history = append(m.history, t.added[t.committed:]...)
	t.committed = len(t.added)
	for _, id := range t.removed {
		delete(m.leaves, id)
	}
	t.removed = nil
}

// reasonFlags collects what happened in a round to pick its YieldReason.
type reasonFlags struct{ suspend, cede, toolUse, maxTokens bool }

func (f reasonFlags) merge(g reasonFlags) reasonFlags {
	return reasonFlags{f.suspend || g.suspend, f.cede || g.cede, f.toolUse || g.toolUse, f.maxTokens || g.maxTokens}
}

func (f reasonFlags) reason() YieldReason {
	switch {
	case f.suspend:
		return Suspend
	case f.cede:
		return Cede
	case f.toolUse:
		return ToolUse
	case f.maxTokens:
		return MaxTokens
	}
	return EndTurn
}

// applyOutcome applies the step result o of leaf in to the tree.
func (t *tx) applyOutcome(o *executor.StepResult, in *instance.Instance) reasonFlags {
	t.usage = t.usage.Add(o.Reply.Usage)
	if o.StateChanged {
		in.State = o.State
	}
	for k, v := range o.Packs {
		t.root.Packs[k] = v
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

// scope returns the To of a leaf's text reply: the primary speaks to the
// shared conversation, workers only to themselves.
func (t *tx) scope(in *instance.Instance) string {
	if t.m.charter.Node(in.Node).Worker() {
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
		in.Node, in.State = eff.Target, eff.State
		if wake {
			in.Idle = false
		}
	case instance.EffectSpawn:
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

// suspended records new suspended calls on in.
func (t *tx) suspended(in *instance.Instance, calls ...instance.SuspendedCall) {
	addCalls(in, calls...)
	for _, c := range calls {
		_, span := tracing.Start(t.ctx, t.m.charter.tracer, "markov.suspend")
		if span.IsRecording() {
			span.SetAttributes(attribute.String("markov.suspend_id", c.SuspendID), attribute.String("markov.instance", c.InstanceID),
				attribute.String("markov.kind", string(c.Kind)), attribute.String("markov.name", c.Name),
				attribute.String("markov.reason", c.Reason))
		}
		span.End()
		t.events = append(t.events, instance.Event{
			Type: instance.EventSuspended, SuspendID: c.SuspendID, InstanceID: c.InstanceID,
			Kind: c.Kind, Name: c.Name, Initiator: c.Initiator, Reason: c.Reason, At: c.SuspendedAt,
		})
	}
}
