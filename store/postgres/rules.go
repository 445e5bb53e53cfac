package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/store"
)

// UseRule implements [store.RuleUses]: the use's row, then the rule's
// count, raised only while below max; the count's row lock orders the
// uses of a rule fleet-wide, and a transaction that waited on it reads the
// count its predecessor committed.
func (s *Store) UseRule(ctx context.Context, rule, suspendID, machineID string, max int64) (used int64, err error) {
	if err := store.ValidateRuleUse(rule, suspendID, machineID); err != nil {
		return 0, fmt.Errorf("postgres: use rule: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q.addRuleUse, rule, suspendID, machineID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 { // this suspension's use, recorded before
			return tx.QueryRow(ctx, s.q.ruleUsed, rule).Scan(&used)
		}
		err = tx.QueryRow(ctx, s.q.countRuleUse, rule, max).Scan(&used)
		if errors.Is(err, pgx.ErrNoRows) {
			used = max
			return fmt.Errorf("rule %q: %d of %d uses: %w", rule, max, max, store.ErrRuleSpent)
		}
		return err
	})
	if err != nil {
		return used, fmt.Errorf("postgres: use rule: %w", err)
	}
	return used, nil
}

// ReleaseRule implements [store.RuleUses].
func (s *Store) ReleaseRule(ctx context.Context, rule, suspendID string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q.dropRuleUse, rule, suspendID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, s.q.uncountRuleUse, rule)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: release rule: %w", err)
	}
	return nil
}

// RuleUsed implements [store.RuleUses].
func (s *Store) RuleUsed(ctx context.Context, rule string) (used int64, err error) {
	if err := s.pool.QueryRow(ctx, s.q.ruleUsed, rule).Scan(&used); err != nil {
		return 0, fmt.Errorf("postgres: rule used: %w", err)
	}
	return used, nil
}
