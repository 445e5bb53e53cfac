package memstore

import (
	"context"
	"fmt"

	"github.com/markov-agents/markov/store"
)

// UseRule implements [store.RuleUses].
func (s *Store) UseRule(ctx context.Context, rule, suspendID, machineID string, max int64) (int64, error) {
	if err := store.ValidateRuleUse(rule, suspendID, machineID); err != nil {
		return 0, fmt.Errorf("memstore: use rule: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	uses := s.ruleUses[rule]
	n := int64(len(uses))
	if uses[suspendID] {
		return n, nil
	}
	if max > 0 && n >= max {
		return n, fmt.Errorf("memstore: rule %q: %d of %d uses: %w", rule, n, max, store.ErrRuleSpent)
	}
	if uses == nil {
		uses = map[string]bool{}
		s.ruleUses[rule] = uses
	}
	uses[suspendID] = true
	return n + 1, nil
}

// ReleaseRule implements [store.RuleUses].
func (s *Store) ReleaseRule(ctx context.Context, rule, suspendID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.ruleUses[rule], suspendID)
	return nil
}

// RuleUsed implements [store.RuleUses].
func (s *Store) RuleUsed(ctx context.Context, rule string) (int64, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return int64(len(s.ruleUses[rule])), nil
}
