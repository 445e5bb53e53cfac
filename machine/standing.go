package machine

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/markov-agents/markov/instance"
)

// RuleBy is the prefix of ResumeInput.By (and of instance.Decision.By,
// instance.Event.By) for a decision a standing rule made: "rule:" and
// the rule's ID.
const RuleBy = "rule:"

// Decider decides suspensions at once, in the step that asks for them:
// standing approvals (package standing, through a durable runner's
// Config.Rules). Machine.SetDecider installs one.
type Decider interface {
	// Decide is asked about every tool and command suspension once the
	// charter's OnSuspend hook has accepted it and its digest is set;
	// node is the node of the instance that asked. It returns the rule
	// that decides the call and the payload, or ok false to leave the
	// call to people. Decide must not change call.
	Decide(ctx context.Context, node string, call *instance.SuspendedCall) (rule string, payload json.RawMessage, ok bool)
}

// SetDecider installs d, which decides suspensions before anyone sees
// them; nil removes it. A call d decides is resolved in the transaction
// that records it — the step that suspends it also resolves it, so a
// save never holds it pending — with a decision by RuleBy and the rule
// (instance.Decision.Rule, the "decided" record of the history, the
// lifecycle event's By, Machine.TakeDecisions). Call it between runs.
func (m *Machine) SetDecider(d Decider) { m.decider = d }

// ruling is a decider's decision on a call not yet recorded.
type ruling struct {
	id, rule string
	payload  json.RawMessage
}

// rulings are the decisions a decider made on calls being admitted, which
// leaves of a round may admit concurrently.
type rulings struct {
	mu   sync.Mutex
	list []ruling
}

func (r *rulings) add(x ruling) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, x)
}

func (r *rulings) take() []ruling {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.list
	r.list = nil
	return l
}

// rule asks the decider about call, suspended by node, and keeps its
// ruling for the transaction that records the call (tx.standing).
func (m *Machine) rule(ctx context.Context, node string, call *instance.SuspendedCall) {
	if m.decider == nil || (call.Kind != instance.KindTool && call.Kind != instance.KindCommand) {
		return
	}
	c := call.Clone()
	if rule, payload, ok := m.decider.Decide(ctx, node, &c); ok {
		m.ruled.add(ruling{id: call.SuspendID, rule: rule, payload: payload})
	}
}

// standing resolves the calls t recorded that the decider decided, each
// with its rule's payload; a resolution that suspends again is asked
// about in turn. Rulings on calls t did not record (a step that failed)
// are dropped. It returns the steps of resolved commands.
func (t *tx) standing() ([]Step, error) {
	var steps []Step
	for {
		list := t.m.ruled.take()
		if len(list) == 0 {
			return steps, nil
		}
		for _, r := range list {
			_, c := t.root.FindCall(r.id)
			if c == nil || c.Status != instance.StatusPending {
				continue
			}
			s, err := t.resumeWith(ResumeInput{SuspendID: r.id, Payload: r.payload, By: RuleBy + r.rule, Digest: c.Digest},
				resolution{cause: instance.CauseExplicit, rule: r.rule})
			if err != nil {
				return steps, err
			}
			steps = append(steps, s...)
		}
	}
}

// suspends reports whether a call t suspended is still pending: a
// standing rule may have resolved every one.
func (t *tx) suspends() bool {
	for _, id := range t.asked {
		if _, c := t.root.FindCall(id); c != nil && c.Status == instance.StatusPending {
			return true
		}
	}
	return false
}
