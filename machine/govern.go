package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
)

// Decided is a decision a run applied to a suspension, in the order they
// came: an explicit resume (ResumeInput), a cancellation (CancelInput), a
// command's resume, a signal, or the deadline (expired, denied or
// escalated).
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
	// Outcome is one of the Decision… outcomes.
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
	// DecisionExpired: the deadline resolved the call by its on-timeout
	// action (a failure, a default payload, a summary); By is empty.
	DecisionExpired = "expired"
	// DecisionEscalated: the deadline re-asked the call under its
	// policy's escalation (instance.Escalation); Decision.Digest is the
	// new digest. By is empty.
	DecisionEscalated = "escalated"
	// DecisionReminded: a reminder came before the deadline
	// (instance.Policy.Remind); the call stays pending. By is empty.
	DecisionReminded = "reminded"
	// DecisionCommand: a command resolved the call (command.Context's
	// Resume); By names the command.
	DecisionCommand = "command"
	// DecisionSignal: a signal resolved the call (SignalInput); By is
	// the signal's, when set.
	DecisionSignal = "signal"
)

// TakeDecisions returns the decisions applied since the last call, and
// forgets them.
func (m *Machine) TakeDecisions() []Decided {
	d := m.decided
	m.decided = nil
	return d
}

// checkDecision checks the decision ri on call c of root at now: the
// digest it names, the identity against the call's policy, and its edit.
func checkDecision(root *instance.Instance, ri ResumeInput, now time.Time) error {
	if _, c := root.FindCall(ri.SuspendID); c != nil {
		if _, err := c.CheckDecision(instance.Identity{Subject: ri.By, Groups: ri.Groups}, ri.Digest, now); err != nil {
			return err
		}
		_, err := checkEdit(c, ri)
		return err
	}
	return nil
}

// checkCancel checks the cancellation ci of a call of root at now: a
// person who cancels a governed call (ci.By set) must be allowed by its
// policy, as a decision is. A cancellation naming nobody is the
// service's own and is not checked; both are audited.
func checkCancel(root *instance.Instance, ci CancelInput, now time.Time) error {
	_, c := root.FindCall(ci.SuspendID)
	if c == nil || c.Policy == nil || ci.By == "" {
		return nil
	}
	if _, err := c.Policy.Authorize(instance.Identity{Subject: ci.By, Groups: ci.Groups}, now); err != nil {
		return fmt.Errorf("cancel %s: %w", ci.SuspendID, err)
	}
	return nil
}

// checkEdit checks the edit of ri, if any, on call c and returns it as
// canonical JSON: the policy must allow it and it must satisfy the call's
// input schema (an *instance.InputError naming the field).
func checkEdit(c *instance.SuspendedCall, ri ResumeInput) (json.RawMessage, error) {
	if ri.Edit == nil {
		return nil, nil
	}
	raw, err := instance.EncodePayload(ri.Edit)
	if err != nil {
		return nil, fmt.Errorf("suspension %s: edit: %w", c.SuspendID, err)
	}
	edit, err := c.CheckEdit(raw, ri.Deny)
	if err != nil || len(c.InputSchema) == 0 {
		return edit, err
	}
	s, err := frame.ParseSchema(c.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("suspension %s: the input schema is unusable: %w: %v", c.SuspendID, instance.ErrInvalidInput, err)
	}
	if err := s.CheckInput(edit); err != nil {
		return nil, fmt.Errorf("suspension %s: edit: %w", c.SuspendID, err)
	}
	return edit, nil
}

// EditedRecord is the data of the "edited" record the history keeps when
// a decision edits a governed call's input (ResumeInput.Edit): who, the
// digests before and after, the input the call now has and the one it
// had before.
type EditedRecord struct {
	By     string          `json:"by"`
	From   string          `json:"from_digest"`
	To     string          `json:"to_digest"`
	Input  json.RawMessage `json:"input"`
	Before json.RawMessage `json:"before,omitempty"`
}

// edit replaces the input of call c of in with edit, the decision d's:
// the digest is recomputed, and decisions recorded on the old input are
// dropped (they approved another action; the audit log keeps them).
func (t *tx) edit(in *instance.Instance, c *instance.SuspendedCall, d *instance.Decision, edit json.RawMessage) error {
	digest, err := instance.CallDigest(in.Node, c.Name, edit, c.Policy.Version)
	if err != nil {
		return err
	}
	t.record(in, "edited", EditedRecord{By: d.By, From: c.Digest, To: digest, Input: edit, Before: c.Input}, c.SuspendID)
	c.Input, c.Digest, c.Decisions = edit, digest, nil
	d.Edit, d.EditDigest = edit, digest
	return nil
}

// editNote is the note a tool result carries when a decision of ds
// edited the call's input, so the model knows what ran and who changed
// it; empty otherwise.
func editNote(ds []instance.Decision) string {
	for i := len(ds) - 1; i >= 0; i-- {
		if d := ds[i]; d.Edit != nil {
			return fmt.Sprintf("[%s edited the input before approving; the call ran with %s]\n", d.By, d.Edit)
		}
	}
	return ""
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
	call.ScheduleReminder(call.SuspendedAt)
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
	edit, err := checkEdit(c, ri)
	if err != nil {
		return nil, err
	}
	d := t.decision(ri.By, ri.Groups, ri.Digest, ri.Deny, ri.IsError, payload)
	if principal != ri.By {
		d.For = principal
	}
	if edit != nil {
		if err := t.edit(in, c, &d, edit); err != nil {
			return nil, err
		}
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

// CheckCancel reports whether Run would accept the cancellation in,
// changing nothing: a person who cancels a governed call (in.By set) must
// be one its policy allows to decide (instance.ErrForbidden). A call the
// machine does not hold is not checked.
func (m *Machine) CheckCancel(in CancelInput) error {
	return checkCancel(m.root, in, m.deadlineClock())
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
