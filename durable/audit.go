package durable

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// AuditRecord is the content of an entry of a store's audit log
// (store.AuditLog) that a Runner writes: a decision on a suspension,
// appended in the save that applies it, or a decision refused, appended
// on its own.
type AuditRecord struct {
	At time.Time `json:"at"`
	// Kind is AuditDecision or AuditRefusal.
	Kind       string `json:"kind"`
	MachineID  string `json:"machine_id"`
	SuspendID  string `json:"suspend_id"`
	InstanceID string `json:"instance_id,omitempty"`
	Node       string `json:"node,omitempty"`
	// Name is the tool or command.
	Name string `json:"name,omitempty"`
	// Outcome is a decision's (machine.Decided.Outcome).
	Outcome string   `json:"outcome,omitempty"`
	By      string   `json:"by,omitempty"`
	For     string   `json:"for,omitempty"`
	Groups  []string `json:"groups,omitempty"`
	Deny    bool     `json:"deny,omitempty"`
	IsError bool     `json:"is_error,omitempty"`
	// Digest is the call's digest the decision named; EditDigest, for a
	// decision that edited the call's input, the digest after the edit
	// (the edited input is in the machine's history, "edited" record).
	Digest     string `json:"digest,omitempty"`
	EditDigest string `json:"edit_digest,omitempty"`
	// PayloadSHA256 is the SHA-256 (hex) of the decision's payload.
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
	// Error is why a refusal was refused.
	Error string `json:"error,omitempty"`
	// Rule is the standing rule that made the decision (By is then
	// machine.RuleBy and the rule's ID).
	Rule string `json:"rule,omitempty"`
}

// The kinds of audit record.
const (
	AuditDecision = "decision"
	AuditRefusal  = "refusal"
)

// auditEntries turns the decisions machine id applied into audit log
// entries.
func (r *Runner) auditEntries(id string, ds []machine.Decided) ([]store.AuditAppend, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	if _, ok := r.store.(store.AuditLog); !ok {
		return nil, nil
	}
	out := make([]store.AuditAppend, 0, len(ds))
	for _, d := range ds {
		e, err := r.auditEntry(AuditRecord{
			At: d.Decision.At, Kind: AuditDecision, MachineID: id, SuspendID: d.SuspendID, InstanceID: d.InstanceID,
			Node: d.Node, Name: d.Name, Outcome: d.Outcome, By: d.Decision.By, For: d.Decision.For,
			Groups: d.Decision.Groups, Deny: d.Decision.Deny, IsError: d.Decision.IsError, Digest: d.Decision.Digest,
			EditDigest: d.Decision.EditDigest, PayloadSHA256: payloadSum(d.Decision.Payload), Rule: d.Decision.Rule,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// auditEntry encodes rec and signs it with the runner's audit key.
func (r *Runner) auditEntry(rec AuditRecord) (store.AuditAppend, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return store.AuditAppend{}, fmt.Errorf("audit record: %w", err)
	}
	e := store.AuditAppend{MachineID: rec.MachineID, Entry: b}
	if r.auditKey != nil {
		e.Signature = ed25519.Sign(r.auditKey, b)
	}
	return e, nil
}

func payloadSum(p json.RawMessage) string {
	if len(p) == 0 {
		return ""
	}
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}

// refusal reports whether err refuses a decision on the policy's or the
// digest's grounds, which the audit log records.
func refusal(err error) bool {
	return errors.Is(err, instance.ErrForbidden) || errors.Is(err, instance.ErrStaleDecision) || errors.Is(err, instance.ErrAlreadyDecided)
}

// checkDecision checks decision in on machine m (id), and appends a
// refusal to the audit log when it is refused.
func (r *Runner) checkDecision(ctx context.Context, id string, m *machine.Machine, in machine.ResumeInput) error {
	err := m.CheckDecision(in)
	if err == nil || !refusal(err) {
		return err
	}
	rec := AuditRecord{MachineID: id, SuspendID: in.SuspendID, By: in.By, Groups: in.Groups, Deny: in.Deny, IsError: in.IsError, Digest: in.Digest}
	if raw, perr := instance.EncodePayload(in.Payload); perr == nil {
		rec.PayloadSHA256 = payloadSum(raw)
	}
	return r.auditRefusal(ctx, m, rec, err)
}

// checkCancel checks the cancellation in on machine m (id) against its
// call's policy, and appends a refusal to the audit log when it is
// refused.
func (r *Runner) checkCancel(ctx context.Context, id string, m *machine.Machine, in machine.CancelInput) error {
	err := m.CheckCancel(in)
	if err == nil || !refusal(err) {
		return err
	}
	return r.auditRefusal(ctx, m, AuditRecord{MachineID: id, SuspendID: in.SuspendID, By: in.By, Groups: in.Groups}, err)
}

// auditRefusal appends rec, a refusal of machine m for err, to the audit
// log (when the store keeps one) and returns err.
func (r *Runner) auditRefusal(ctx context.Context, m *machine.Machine, rec AuditRecord, err error) error {
	l, ok := r.store.(store.AuditLog)
	if !ok {
		return err
	}
	rec.At, rec.Kind, rec.Error = r.charter.Now().UTC(), AuditRefusal, err.Error()
	for _, c := range m.Pending() {
		if c.SuspendID == rec.SuspendID {
			rec.InstanceID, rec.Name = c.InstanceID, c.Name
		}
	}
	e, aerr := r.auditEntry(rec)
	if aerr == nil {
		aerr = l.AppendAudit(ctx, []store.AuditAppend{e})
	}
	if aerr != nil {
		return errors.Join(err, fmt.Errorf("audit the refusal: %w", aerr))
	}
	return err
}
