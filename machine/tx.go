package machine

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// tx is one batch of changes to a tree: applied to a working copy for
// inputs (so a failure leaves the machine untouched) or to the live tree
// for a round, then committed. It holds its collaborators: the machine
// (for what history tells), and the charter's executor, nodes, tracer and
// clock. Its writes to the tree are in apply.go.
type tx struct {
	m      *Machine
	exec   executor.Executor
	nodes  map[string]*node.Node
	tracer trace.Tracer
	now    func() time.Time

	ctx     context.Context
	root    *instance.Instance
	added   []message.Message
	removed []string
	events  []instance.Event
	// committed and reported index added (and events) up to where they
	// went to history and into a step.
	committed, reported, eventsReported int
	usage                               llm.Usage
	cedes                               []Ceded
	held                                []message.Message
	// metered indexes events up to where commit counted them in the
	// suspension metrics; links are the span links to the suspensions
	// this transaction resolved, for the run's span.
	metered int
	links   []trace.Link
	// decisions are the decisions applied, for the audit log.
	decisions []Decided
	// asked are the calls suspended in t (tx.suspended).
	asked []string
}

// newTx starts a transaction on root. Messages, events and cedes of carry,
// already applied, are reported by its first step.
func (m *Machine) newTx(ctx context.Context, root *instance.Instance, carry *report) *tx {
	c := m.charter
	t := &tx{m: m, exec: c.exec, nodes: c.nodes, tracer: c.tracer, now: c.now, ctx: ctx, root: root}
	if carry != nil {
		t.added = append(t.added, carry.msgs...)
		t.committed = len(t.added)
		t.events = append(t.events, carry.events...)
		t.metered = len(t.events) // counted when their own transaction committed
		t.cedes = append(t.cedes, carry.cedes...)
	}
	return t
}

// primaryLeaf returns the non-worker leaf of t's tree, suspended or not,
// or nil.
func (t *tx) primaryLeaf() *instance.Instance { return primaryLeaf(t.nodes, t.root) }

// report is what inputs did that no step has reported yet.
type report struct {
	msgs   []message.Message
	events []instance.Event
	cedes  []Ceded
}

func (r *report) empty() bool {
	return r == nil || (len(r.msgs) == 0 && len(r.events) == 0 && len(r.cedes) == 0)
}

// merge returns r followed by s.
func (r *report) merge(s *report) *report {
	switch {
	case r.empty():
		return s
	case s.empty():
		return r
	}
	return &report{
		msgs:   slices.Concat(r.msgs, s.msgs),
		events: slices.Concat(r.events, s.events),
		cedes:  slices.Concat(r.cedes, s.cedes),
	}
}

// leftover returns what t has not reported, or nil.
func (t *tx) leftover() *report {
	if t.empty() {
		return nil
	}
	return &report{msgs: t.added[t.reported:], events: t.events[t.eventsReported:], cedes: t.cedes}
}

func (t *tx) add(msg message.Message) { t.added = append(t.added, msg) }

// empty reports whether t has nothing left to report.
func (t *tx) empty() bool {
	return t == nil || (t.reported == len(t.added) && t.eventsReported == len(t.events) && len(t.cedes) == 0)
}

// step builds a step reporting what t has not reported yet.
func (t *tx) step(r YieldReason) Step {
	s := Step{Reason: r, Usage: t.usage}
	if t.reported < len(t.added) {
		s.Messages = message.CloneAll(t.added[t.reported:])
	}
	if t.eventsReported < len(t.events) {
		s.Events = append([]instance.Event(nil), t.events[t.eventsReported:]...)
	}
	if len(t.held) > 0 {
		s.Held, t.held = message.CloneAll(t.held), nil
	}
	if len(t.cedes) > 0 {
		s.Cedes, s.CedeContent = t.cedes, t.cedes[0].Content
		if s.Reason != Suspend {
			s.Reason = Cede
		}
	}
	t.reported, t.eventsReported = len(t.added), len(t.events)
	t.usage, t.cedes = llm.Usage{}, nil
	return s
}

// record adds an instance record to history.
func (t *tx) record(in *instance.Instance, name string, data any, suspendID string) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = nil
	}
	p := message.RecordPart(name, raw)
	p.SuspendID = suspendID
	t.add(message.Message{
		Role:   message.Record,
		Parts:  []message.Part{p},
		Source: message.Source{InstanceID: in.ID, Node: in.Node, To: in.ID},
	})
}
