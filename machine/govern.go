package machine

import (
	"context"
	"slices"
	"time"

	"github.com/markov-agents/markov/instance"
)

// Decided is a decision a run applied to a suspension, in the order they
// came: an explicit resume (ResumeInput) or a cancellation (CancelInput).
// Durable runners append each to their store's audit log in the save
// that records it (Machine.TakeDecisions).
type Decided struct {
	SuspendID  string
	InstanceID string
	// Node is the node of the instance that holds the call; Name the
	// tool or command.
	Node, Name string
	// Decision is the decision as recorded: who, for whom, the digest
	// named, the payload.
	Decision instance.Decision
	// Outcome is DecisionRecorded, DecisionApproved, DecisionDenied or
	// DecisionCancelled.
	Outcome string
}

// The outcomes of a decision (Decided.Outcome).
const (
	// DecisionRecorded: the decision is recorded; the call's policy
	// waits for more.
	DecisionRecorded = "recorded"
	// DecisionApproved: the decision resolved the call.
	DecisionApproved = "approved"
	// DecisionDenied: the decision, a refusal, resolved the call.
	DecisionDenied = "denied"
	// DecisionCancelled: the decision cancelled the call.
	DecisionCancelled = "cancelled"
)

// TakeDecisions returns the decisions applied since the last call, and
// forgets them.
func (m *Machine) TakeDecisions() []Decided {
	d := m.decided
	m.decided = nil
	return d
}

// checkDecision checks the decision ri on call c of root at now: the
// digest it names, and the identity against the call's policy.
func checkDecision(root *instance.Instance, ri ResumeInput, now time.Time) error {
	if _, c := root.FindCall(ri.SuspendID); c != nil {
		_, err := c.CheckDecision(instance.Identity{Subject: ri.By, Groups: ri.Groups}, ri.Digest, now)
		return err
	}
	return nil
}

// governCall sets the digest of call, suspended by node, and the
// requester of its policy, when the policy names none, from the
// identity of ctx.
func governCall(ctx context.Context, node string, call *instance.SuspendedCall) error {
	version := 0
	if p := call.Policy; p != nil {
		version = p.Version
		if p.Requester == "" {
			if id, ok := instance.IdentityOf(ctx); ok {
				p.Requester = id.Subject
			}
		}
	}
	d, err := instance.CallDigest(node, call.Name, call.Input, version)
	if err != nil {
		return err
	}
	call.Digest = d
	return nil
}

// vote records the decision ri, of payload, on governed call c of
// instance in. It returns the decisions when they settle the call (the
// call then resolves), nil when the call waits for more.
func (t *tx) vote(in *instance.Instance, c *instance.SuspendedCall, ri ResumeInput, payload []byte) (settled []instance.Decision, err error) {
	principal, err := c.CheckDecision(instance.Identity{Subject: ri.By, Groups: ri.Groups}, ri.Digest, t.m.deadlineClock())
	if err != nil {
		return nil, err
	}
	d := t.decision(ri.By, ri.Groups, ri.Digest, ri.Deny, ri.IsError, payload)
	if principal != ri.By {
		d.For = principal
	}
	c.Decisions = append(c.Decisions, d)
	if s := c.Policy.Tally(c.Decisions); s != nil {
		return slices.Clone(c.Decisions), nil
	}
	t.decide(in, c, d, DecisionRecorded)
	t.record(in, "decision", map[string]any{"suspend_id": c.SuspendID, "by": d.By, "for": d.For, "deny": d.Deny,
		"decisions": len(c.Decisions), "quorum": max(c.Policy.Quorum, 1)}, "")
	return nil, nil
}

// decision is a decision made now.
func (t *tx) decision(by string, groups []string, digest string, deny, isError bool, payload []byte) instance.Decision {
	return instance.Decision{By: by, Groups: slices.Clone(groups), Deny: deny, IsError: isError,
		Payload: append([]byte(nil), payload...), Digest: digest, At: t.now().UTC()}
}

// decide notes decision d on call c of in, with its outcome, for the
// audit log (Machine.TakeDecisions).
func (t *tx) decide(in *instance.Instance, c *instance.SuspendedCall, d instance.Decision, outcome string) {
	t.decisions = append(t.decisions, Decided{SuspendID: c.SuspendID, InstanceID: in.ID, Node: in.Node, Name: c.Name, Decision: d, Outcome: outcome})
}

// CheckDecision reports whether Run would accept resume in as a decision
// on its call, changing nothing: the digest it names, when it names one
// or the call is governed, must be the call's (instance.ErrStaleDecision);
// under a policy its identity must be allowed (instance.ErrForbidden) and
// must not have decided already (instance.ErrAlreadyDecided). A call the
// machine does not hold is not checked.
func (m *Machine) CheckDecision(in ResumeInput) error {
	return checkDecision(m.root, in, m.deadlineClock())
}
