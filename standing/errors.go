package standing

import (
	"errors"
	"fmt"
)

// ErrBadRule is wrapped by every error of a rule that does not compile
// ([*RuleError]).
var ErrBadRule = errors.New("standing: bad rule")

// RuleError is a rule that does not compile: which rule (its ID, or its
// position when it has none), which field, and why.
type RuleError struct {
	// Rule is the rule's ID, or "#N" (from 1) when it has none.
	Rule  string
	Field string
	Err   error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("standing: rule %s: %s: %v", e.Rule, e.Field, e.Err)
}

// Unwrap returns ErrBadRule and the cause.
func (e *RuleError) Unwrap() []error { return []error{ErrBadRule, e.Err} }
