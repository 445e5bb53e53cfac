package instance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Policy governs who may decide a suspension and how many must agree. A
// tool, command or caller declares it with WithPolicy; the call records
// it, and every decision (a ResumeInput) is checked against it before
// anything changes: a decision it does not allow wraps ErrForbidden.
//
// A decision comes from an Identity (ResumeInput.By and Groups). It is
// allowed when the subject is one of Subjects, or holds one of Groups, or
// decides for someone who is (Delegations) — unless SeparateDuties names
// the subject (or the one they decide for) as the Requester. Decisions are
// recorded on the call as they come (SuspendedCall.Decisions); the call
// resolves when Quorum distinct approvers agree, with the payload of the
// decision that completed the quorum.
type Policy struct {
	// Version is the policy's version, part of the call's digest: a
	// decision made under another version is stale.
	Version int `json:"version,omitempty"`
	// Subjects are the identities allowed to decide.
	Subjects []string `json:"subjects,omitempty"`
	// Groups are the groups or roles whose members may decide.
	Groups []string `json:"groups,omitempty"`
	// Quorum is the number of distinct approvers whose agreement resolves
	// the call; 0 means 1. A policy of Subjects only may not ask for more
	// approvers than it names.
	Quorum int `json:"quorum,omitempty"`
	// FirstDenyRejects resolves the call with the first refusal
	// (ResumeInput.Deny); otherwise Quorum refusals are needed, as
	// approvals are.
	FirstDenyRejects bool `json:"first_deny_rejects,omitempty"`
	// SeparateDuties refuses a decision from the Requester.
	SeparateDuties bool `json:"separate_duties,omitempty"`
	// Requester is the identity that led to the call: the one that started
	// the run, invoked the command or sent the message. Empty means the
	// identity of the run's context (WithIdentity) when the call suspends.
	Requester string `json:"requester,omitempty"`
	// Delegations hand an approver's right to another identity until a
	// time.
	Delegations []Delegation `json:"delegations,omitempty"`
	// AllowEdit lets an approver edit the call's input before approving
	// (machine.ResumeInput.Edit): the edit must satisfy the tool's or
	// command's input schema, the digest is recomputed, and the call runs
	// with the edited input.
	AllowEdit bool `json:"allow_edit,omitempty"`
	// Escalation, when set, is what the call's deadline does instead of
	// its on-timeout action: the call stays pending under another policy
	// with a new deadline (Escalation).
	Escalation *Escalation `json:"escalation,omitempty"`
	// AllowRules lets standing approvals (package standing) decide the
	// call: a rule's decision then settles it alone, whatever Quorum and
	// SeparateDuties ask. Without it no rule decides a governed call, and
	// people do.
	AllowRules bool `json:"allow_rules,omitempty"`
	// Remind, when positive, reminds the approvers every Remind while
	// the call waits, before its deadline: a "reminded" lifecycle event
	// (EventReminded) on the machine's log, which leaves the call pending
	// and its deadline where it is. The first reminder comes Remind after
	// the call suspends (or escalates); none comes at or after the
	// deadline.
	Remind time.Duration `json:"remind,omitempty"`
}

// Escalation re-asks a governed call at its deadline: the call stays
// pending under Policy (another group, say), its deadline moved Timeout
// later and its decisions so far dropped. Policy's version is raised
// above the old one when it is not already, so the call's digest changes
// and a decision made on the old one is stale. Policy may escalate again.
type Escalation struct {
	Policy  Policy        `json:"policy"`
	Timeout time.Duration `json:"timeout"`
}

// Delegation hands From's right to decide to To until Until (the zero
// time: no end). Chains are followed (A to B, B to C lets C decide for
// A); a cycle is refused when the policy is declared.
type Delegation struct {
	From  string    `json:"from"`
	To    string    `json:"to"`
	Until time.Time `json:"until,omitzero"`
}

// Identity is who makes a decision: a subject and the groups (or roles)
// it holds. Where it comes from — a signed request's body, a signed-in
// person — is the caller's to verify.
type Identity struct {
	Subject string   `json:"subject"`
	Groups  []string `json:"groups,omitempty"`
}

// Decision is one decision recorded on a governed call.
type Decision struct {
	// By is the subject who decided; For, when set, the approver they
	// decided for (a delegation).
	By     string   `json:"by"`
	For    string   `json:"for,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Deny marks a refusal.
	Deny    bool            `json:"deny,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Digest is the call's digest the decision named.
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
	// Edit is the call's input as the decider edited it (canonical JSON),
	// and EditDigest the call's digest after the edit; both empty for a
	// decision that edits nothing.
	Edit       json.RawMessage `json:"edit,omitempty"`
	EditDigest string          `json:"edit_digest,omitempty"`
	// Rule, when set, is the standing approval rule that made the
	// decision (package standing); By is then "rule:" and its ID.
	Rule string `json:"rule,omitempty"`
}

// Principal is the approver the decision counts for: For, or By.
func (d Decision) Principal() string {
	if d.For != "" {
		return d.For
	}
	return d.By
}

// WithPolicy governs the suspension with p. A policy that cannot be
// satisfied (Policy.Check) fails the option, and the call fails rather
// than suspends.
func WithPolicy(p Policy) SuspendOption {
	return func(r *SuspendRequest) error {
		if err := p.Check(); err != nil {
			return err
		}
		p = p.Clone()
		r.Policy = &p
		return nil
	}
}

// Check reports a policy no decision could satisfy: one naming no
// approver (ErrNoApprover), a quorum below zero or above the subjects it
// names (ErrQuorumTooLarge), a delegation with an empty side or a cycle
// (ErrDelegationCycle). Each wraps ErrBadPolicy.
func (p Policy) Check() error {
	if len(p.Subjects) == 0 && len(p.Groups) == 0 {
		return fmt.Errorf("policy: subjects and groups are empty: %w", ErrNoApprover)
	}
	for _, s := range append(slices.Clone(p.Subjects), p.Groups...) {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("policy: an empty subject or group: %w", ErrNoApprover)
		}
	}
	if e := p.Escalation; e != nil {
		if e.Timeout <= 0 {
			return fmt.Errorf("policy: escalation timeout %s is not positive: %w", e.Timeout, ErrBadPolicy)
		}
		if err := e.Policy.Check(); err != nil {
			return fmt.Errorf("escalation: %w", err)
		}
	}
	if p.Remind < 0 {
		return fmt.Errorf("policy: remind %s is negative: %w", p.Remind, ErrBadPolicy)
	}
	if p.Quorum < 0 {
		return fmt.Errorf("policy: quorum %d is negative: %w", p.Quorum, ErrQuorumTooLarge)
	}
	if len(p.Groups) == 0 && p.quorum() > len(p.Subjects) {
		return fmt.Errorf("policy: quorum %d of %d subjects: %w", p.quorum(), len(p.Subjects), ErrQuorumTooLarge)
	}
	next := map[string][]string{}
	for _, d := range p.Delegations {
		if d.From == "" || d.To == "" || d.From == d.To {
			return fmt.Errorf("policy: delegation %q to %q: %w", d.From, d.To, ErrDelegationCycle)
		}
		next[d.From] = append(next[d.From], d.To)
	}
	// A depth-first walk from every identity finds any cycle.
	const (
		visiting = 1
		done     = 2
	)
	mark := map[string]int{}
	var walk func(string) error
	walk = func(s string) error {
		switch mark[s] {
		case visiting:
			return fmt.Errorf("policy: delegations return to %q: %w", s, ErrDelegationCycle)
		case done:
			return nil
		}
		mark[s] = visiting
		for _, t := range next[s] {
			if err := walk(t); err != nil {
				return err
			}
		}
		mark[s] = done
		return nil
	}
	for _, d := range p.Delegations {
		if err := walk(d.From); err != nil {
			return err
		}
	}
	return nil
}

func (p Policy) quorum() int { return max(p.Quorum, 1) }

// Clone returns a deep copy of p.
func (p Policy) Clone() Policy {
	p.Subjects = slices.Clone(p.Subjects)
	p.Groups = slices.Clone(p.Groups)
	p.Delegations = slices.Clone(p.Delegations)
	if p.Escalation != nil {
		e := Escalation{Policy: p.Escalation.Policy.Clone(), Timeout: p.Escalation.Timeout}
		p.Escalation = &e
	}
	return p
}

// allows reports whether id, by itself, is an approver of p.
func (p Policy) allows(subject string, groups []string) bool {
	if slices.Contains(p.Subjects, subject) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(p.Groups, g) {
			return true
		}
	}
	return false
}

// Authorize returns the approver a decision of id at now counts for: the
// subject itself, or the one it decides for through delegations (whose
// groups are not known, so a delegation must start at one of Subjects). A
// decision the policy does not allow wraps ErrForbidden: an empty
// subject, a subject neither allowed nor a delegate of an approver with a
// delegation still running, and under SeparateDuties the requester.
func (p Policy) Authorize(id Identity, now time.Time) (principal string, err error) {
	if id.Subject == "" {
		return "", fmt.Errorf("policy: a decision without a subject: %w", ErrForbidden)
	}
	principal = id.Subject
	if !p.allows(id.Subject, id.Groups) {
		principal = p.delegator(id.Subject, now, map[string]bool{})
		if principal == "" {
			return "", fmt.Errorf("policy: %q may not decide: %w", id.Subject, ErrForbidden)
		}
	}
	if p.SeparateDuties && p.Requester != "" && (id.Subject == p.Requester || principal == p.Requester) {
		return "", fmt.Errorf("policy: %q asked for this and may not decide it: %w", p.Requester, ErrSeparationOfDuties)
	}
	return principal, nil
}

// delegator returns an approver (one of Subjects) that delegated to
// subject, directly or through a chain, with every link running at now.
func (p Policy) delegator(subject string, now time.Time, seen map[string]bool) string {
	if seen[subject] {
		return ""
	}
	seen[subject] = true
	for _, d := range p.Delegations {
		if d.To != subject || (!d.Until.IsZero() && !now.Before(d.Until)) {
			continue
		}
		if slices.Contains(p.Subjects, d.From) {
			return d.From
		}
		if up := p.delegator(d.From, now, seen); up != "" {
			return up
		}
	}
	return ""
}

// Tally reports how decisions stand under p: resolved when they settle
// the call, with the decision that settled it.
func (p Policy) Tally(decisions []Decision) (settled *Decision) {
	approve, deny := 0, 0
	for i := range decisions {
		d := &decisions[i]
		if d.Deny {
			deny++
			if p.FirstDenyRejects || deny >= p.quorum() {
				return d
			}
			continue
		}
		approve++
		if approve >= p.quorum() {
			return d
		}
	}
	return nil
}

// CheckDecision reports whether a decision of id, naming digest, may be
// recorded on call c at now: c is governed, digest is c's, and id is
// allowed and has not decided already. It returns the approver the
// decision counts for. A call without a policy takes any decision
// (principal empty), but a digest, when named, must still be the call's.
func (c *SuspendedCall) CheckDecision(id Identity, digest string, now time.Time) (principal string, err error) {
	if (digest != "" || c.Policy != nil) && digest != c.Digest {
		return "", fmt.Errorf("suspension %s: decision on digest %q, the call's is %q: %w", c.SuspendID, digest, c.Digest, ErrStaleDecision)
	}
	if c.Policy == nil {
		return "", nil
	}
	principal, err = c.Policy.Authorize(id, now)
	if err != nil {
		return "", fmt.Errorf("suspension %s: %w", c.SuspendID, err)
	}
	for _, d := range c.Decisions {
		if d.Principal() == principal {
			return "", fmt.Errorf("suspension %s: %q decided at %s: %w", c.SuspendID, principal, d.At.Format(time.RFC3339), ErrAlreadyDecided)
		}
	}
	return principal, nil
}

// CheckEdit reports whether a decision may replace the call's input with
// edit (canonical JSON returned): the call's policy must allow edits and
// the decision must approve (ErrEditNotAllowed), and edit must be JSON
// (ErrPayloadDecode). The input schema is the caller's to check.
func (c *SuspendedCall) CheckEdit(edit json.RawMessage, deny bool) (json.RawMessage, error) {
	if c.Policy == nil || !c.Policy.AllowEdit {
		return nil, fmt.Errorf("suspension %s: its policy allows no edit: %w", c.SuspendID, ErrEditNotAllowed)
	}
	if deny {
		return nil, fmt.Errorf("suspension %s: an edit goes with an approval, not a refusal: %w", c.SuspendID, ErrEditNotAllowed)
	}
	canon, err := CanonicalJSON(edit)
	if err != nil {
		return nil, fmt.Errorf("suspension %s: edit: %w", c.SuspendID, err)
	}
	return canon, nil
}

// Escalate moves the call, at its deadline now, to its policy's
// escalation: the escalation's policy (its version raised above the old
// one's, and its requester kept), a deadline Timeout after now, no
// decisions, and the digest recomputed for node. It reports false, and
// changes nothing, for a call without an escalation.
func (c *SuspendedCall) Escalate(node string, now time.Time) (bool, error) {
	if c.Policy == nil || c.Policy.Escalation == nil {
		return false, nil
	}
	e := c.Policy.Escalation
	next := e.Policy.Clone()
	next.Version = max(next.Version, c.Policy.Version+1)
	if next.Requester == "" {
		next.Requester = c.Policy.Requester
	}
	digest, err := CallDigest(node, c.Name, c.Input, next.Version)
	if err != nil {
		return false, err
	}
	c.Policy, c.Decisions, c.Digest = &next, nil, digest
	c.Deadline = now.Add(e.Timeout).UTC()
	c.RemindAt = time.Time{}
	c.ScheduleReminder(now)
	return true, nil
}

// ScheduleReminder sets RemindAt, the call's next reminder, to the first
// time after from that is a whole number of its policy's Remind
// intervals past the current RemindAt (or past from, when there is none),
// or to zero when that is not before the deadline or the policy reminds
// no one. Reminders missed while nothing ran the call are not made up.
func (c *SuspendedCall) ScheduleReminder(from time.Time) {
	if c.Policy == nil || c.Policy.Remind <= 0 {
		c.RemindAt = time.Time{}
		return
	}
	every := c.Policy.Remind
	next := from.Add(every)
	switch {
	case c.RemindAt.After(from):
		next = c.RemindAt // not due yet
	case !c.RemindAt.IsZero():
		// Keep the rhythm: the first of RemindAt + k·every after from.
		next = c.RemindAt.Add((from.Sub(c.RemindAt)/every + 1) * every)
	}
	if !c.Deadline.IsZero() && !next.Before(c.Deadline) {
		next = time.Time{}
	}
	c.RemindAt = next.UTC()
}

// ReminderDue reports whether the call is pending with a reminder at or
// before now, and before its deadline.
func (c *SuspendedCall) ReminderDue(now time.Time) bool {
	return c.Status == StatusPending && !c.RemindAt.IsZero() && !now.Before(c.RemindAt) && !c.Expired(now)
}

// CallDigest returns the digest of what a decision on a call decides: the
// node, the tool or command name, the canonical JSON of its input and the
// policy's version, hashed with SHA-256 (hex). Canonical JSON has its
// object keys sorted, no insignificant space, and numbers as written.
func CallDigest(node, name string, input json.RawMessage, policyVersion int) (string, error) {
	canon, err := CanonicalJSON(input)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	b, _ := json.Marshal([]any{node, name, json.RawMessage(canon), policyVersion})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CanonicalJSON returns raw with object keys sorted and insignificant
// space removed; numbers keep their text. Empty input is null. Invalid
// JSON wraps ErrPayloadDecode.
func CanonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: canonical JSON: %v", ErrPayloadDecode, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: canonical JSON: trailing data", ErrPayloadDecode)
	}
	// encoding/json writes map keys sorted and json.Number as written.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: canonical JSON: %v", ErrPayloadDecode, err)
	}
	return b, nil
}

type identityKey struct{}

// WithIdentity returns ctx carrying id: the identity on whose behalf a run
// goes. A governed call that suspends in the run records its subject as
// the policy's Requester (unless the policy names one).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityOf returns the identity ctx carries (WithIdentity), if any.
func IdentityOf(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
