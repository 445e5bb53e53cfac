package machine

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/tracing"
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
	return sequence(m, func(yield func(Step, error) bool) { m.run(ctx, inputs, yield) })
}

// sequence returns the single-use sequence of a run of m that body makes:
// body runs with m marked running (a second run at once yields
// ErrRunning), and ranging over the sequence again yields ErrIterReused.
func sequence[T any](m *Machine, body func(yield func(T, error) bool)) iter.Seq2[T, error] {
	var used atomic.Bool
	return func(yield func(T, error) bool) {
		var zero T
		if !m.running.CompareAndSwap(false, true) {
			yield(zero, ErrRunning)
			return
		}
		if used.Swap(true) {
			m.running.Store(false)
			yield(zero, ErrIterReused)
			return
		}
		defer m.running.Store(false)
		body(yield)
	}
}

func (m *Machine) run(ctx context.Context, inputs []Input, yield func(Step, error) bool) {
	if err := ctx.Err(); err != nil {
		yield(Step{}, err)
		return
	}
	ctx, span := m.startRun(ctx, len(inputs))
	defer span.End()
	if span.IsRecording() {
		yield = traced(span, yield)
	}
	pre, carry, err := m.applyInputs(ctx, inputs)
	if err != nil {
		yield(Step{}, err)
		return
	}
	m.linkResumed(span)
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
	if !m.announceInputs() {
		return
	}
	if ended, err := m.rounds(ctx, emit); err != nil || ended {
		if err != nil {
			yield(Step{}, err)
		}
		return
	}
	m.lastStep(ctx, emit)
}

// startRun starts the span of a run with n inputs, and logs it.
func (m *Machine) startRun(ctx context.Context, n int) (context.Context, trace.Span) {
	var span trace.Span = noSpan
	if !m.charter.untraced() {
		ctx, span = m.charter.tracer.Start(ctx, "markov.run")
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.root", m.root.ID), attribute.Int("markov.inputs", n))
	}
	m.charter.logger.LogAttrs(ctx, slog.LevelDebug, "run", slog.String("root", m.root.ID), slog.Int("inputs", n))
	return tracing.Run(ctx, span), span
}

// noSpan is the span of an untraced run: it records nothing, and ends
// nothing of the caller's.
var noSpan = trace.SpanFromContext(context.Background())

// rounds runs rounds while a leaf has work, handing each step to emit. It
// reports whether the run ended: the caller stopped, or a step was the
// last.
func (m *Machine) rounds(ctx context.Context, emit func(Step) bool) (ended bool, err error) {
	for round := 0; m.hasWork(); round++ {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		if round >= m.charter.maxSteps {
			return true, fmt.Errorf("%w: %d rounds", ErrMaxSteps, round)
		}
		if m.checkpoints {
			if ended, err := m.replies(ctx, emit); ended {
				return true, err
			}
			if !m.hasWork() {
				continue // the caller suspended the leaf at the Replied step
			}
		}
		step, err := m.round(ctx, m.unreported)
		if err != nil {
			return true, err
		}
		m.unreported = nil
		step.Done = !m.hasWork()
		if !emit(step) || step.Done {
			return true, nil
		}
	}
	return false, nil
}

// lastStep ends a run no step ended: none ran, or the caller suspended the
// primary leaf at the last step boundary. It reports what is unreported,
// and the pending calls.
func (m *Machine) lastStep(ctx context.Context, emit func(Step) bool) {
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

// linkResumed links span, a run's, to the spans that created the
// suspensions resolved since the last run started: by this run's inputs,
// or by an Apply (a durable runner's) before it.
func (m *Machine) linkResumed(span trace.Span) {
	for _, l := range m.links {
		span.AddLink(l)
	}
	m.links = nil
}

// meter counts the suspensions created and resolved by the events t
// added since it last committed.
func (t *tx) meter() {
	met := t.m.charter.met
	for _, ev := range t.events[t.metered:] {
		switch ev.Type {
		case instance.EventSuspended:
			met.Created(t.ctx, string(ev.Kind))
		case instance.EventResumed, instance.EventExpired, instance.EventCancelled:
			met.Resolved(t.ctx, string(ev.Kind), string(ev.Type))
			t.m.resolved(t.ctx, ev)
		}
	}
	t.metered = len(t.events)
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
	return m.apply(ctx, inputs)
}

// apply is Apply, m marked running.
func (m *Machine) apply(ctx context.Context, inputs []Input) ([]Step, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pre, carry, err := m.applyInputs(ctx, inputs)
	if err != nil {
		return nil, err
	}
	m.unreported = m.unreported.merge(carry)
	m.finishPre(pre)
	return pre, nil
}

// finishPre finishes the command steps of an Apply or Expire: the last is
// Done when nothing is left to run or report.
func (m *Machine) finishPre(pre []Step) {
	for i := range pre {
		pre[i].Done = i == len(pre)-1 && !m.hasWork() && m.unreported.empty()
		m.finishStep(&pre[i])
	}
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
	reqs, err := m.stepRequests()
	if err != nil {
		return Step{}, err
	}
	results, err := m.stepLeaves(ctx, reqs)
	if cerr := ctx.Err(); cerr != nil {
		return Step{}, cerr
	}
	if err != nil {
		return Step{}, err
	}
	t := m.newTx(ctx, m.root, carry)
	// The round's messages go into the last round's list (history and
	// the step took copies of them), with room for a reply and its
	// results per leaf: a round of many leaves grows no list.
	t.added = append(slices.Grow(m.added[:0], len(t.added)+2*len(results)), t.added...)
	flags := reasonFlags{}
	for i, r := range results {
		flags = flags.merge(t.applyOutcome(r, reqs[i].Instance))
	}
	if _, err := t.standing(); err != nil { // a round suspends tool calls only: no command steps
		return Step{}, err
	}
	flags.suspend = flags.suspend && t.suspends()
	m.commit(t)
	s := t.step(flags.reason())
	m.added = t.added
	clear(reqs) // the next round's requests reuse the array
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
	if m.charter.spareStep != nil && len(m.spares) < len(reqs) {
		m.spares = append(m.spares, make([]any, len(reqs)-len(m.spares))...)
	}
	if len(reqs) == 1 {
		var err error
		results[0], err = m.step(ctx, 0, &reqs[0])
		return results, err
	}
	errs := make([]error, len(reqs))
	runners.runAll(len(reqs), func(i int) { results[i], errs[i] = m.step(ctx, i, &reqs[i]) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// step runs the i-th step of a round. With the standard executor
// (charter.spareStep), it runs in the memory of the last round's i-th
// step (m.spares), whose result the machine has applied and never reads
// again: a round of many leaves allocates no leaf and result of its own.
// Another executor's Step runs as it is: a wrapper may keep the results.
func (m *Machine) step(ctx context.Context, i int, req *executor.StepRequest) (*executor.StepResult, error) {
	if m.charter.spareStep == nil {
		return m.charter.exec.Step(ctx, req)
	}
	r, err := m.charter.spareStep(ctx, req, &m.spares[i])
	res, _ := r.(*executor.StepResult)
	return res, err
}

// commit appends a transaction's messages to history and forgets the
// caches of instances that left the tree.
func (m *Machine) commit(t *tx) {
	m.root = t.root
	msgs := t.added[t.committed:]
	m.fresh.addAll(msgs, m.history.Len(), len(m.leaves) > 1)
	m.history.Append(msgs...)
	t.committed = len(t.added)
	t.meter()
	m.links = append(m.links, t.links...)
	t.links = nil
	m.decided = append(m.decided, t.decisions...)
	t.decisions = nil
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
