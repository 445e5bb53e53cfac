package store

import (
	"context"
	"fmt"
)

// RuleUses is the optional capability of a [Store] that counts the uses
// of standing approval rules (package standing), fleet-wide: a use is
// recorded in a transaction that admits it only while fewer than the
// rule's maximum are recorded, so processes that race for a rule's last
// use get it once between them.
type RuleUses interface {
	// UseRule records a use of rule for the suspension suspendID of
	// machineID and returns the uses recorded, this one included. With
	// max > 0 it fails with ErrRuleSpent, recording nothing, when max
	// uses are recorded already. A second use for the same suspendID is
	// the first one: nothing more is recorded.
	UseRule(ctx context.Context, rule, suspendID, machineID string, max int64) (used int64, err error)
	// ReleaseRule forgets the use of rule for suspendID (a decision that
	// was never saved), giving it back; one not recorded is no error.
	ReleaseRule(ctx context.Context, rule, suspendID string) error
	// RuleUsed returns the uses of rule recorded (0 for a rule never
	// used).
	RuleUsed(ctx context.Context, rule string) (int64, error)
}

// ValidateRuleUse reports a malformed use, wrapping [ErrInvalid]: a rule,
// suspend or machine ID that is not a [ValidID].
func ValidateRuleUse(rule, suspendID, machineID string) error {
	for _, f := range [...]struct{ name, id string }{{"rule", rule}, {"suspend ID", suspendID}, {"machine ID", machineID}} {
		if p := idProblem(f.id); p != "" {
			return fmt.Errorf("%w: rule use: the %s %s", ErrInvalid, f.name, p)
		}
	}
	return nil
}
