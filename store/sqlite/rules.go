package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/store"
)

const ruleUsedSQL = `SELECT coalesce((SELECT used FROM rule_counts WHERE rule = ?), 0)`

// UseRule implements [store.RuleUses], in one write transaction (BEGIN
// IMMEDIATE, so writers of every process take turns): the use's row, then
// the rule's count, raised only while below max.
func (s *Store) UseRule(ctx context.Context, rule, suspendID, machineID string, max int64) (used int64, err error) {
	if err := store.ValidateRuleUse(rule, suspendID, machineID); err != nil {
		return 0, fmt.Errorf("sqlite: use rule: %w", err)
	}
	err = s.writeOn(ctx, false, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO rule_uses (rule, suspend_id, machine_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, rule, suspendID, machineID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 { // this suspension's use, recorded before
			return errors.Join(err, tx.QueryRowContext(ctx, ruleUsedSQL, rule).Scan(&used))
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO rule_counts (rule, used) VALUES (?, 1)
			ON CONFLICT (rule) DO UPDATE SET used = used + 1 WHERE ?2 <= 0 OR used < ?2 RETURNING used`, rule, max).Scan(&used)
		if errors.Is(err, sql.ErrNoRows) {
			used = max
			return fmt.Errorf("rule %q: %d of %d uses: %w", rule, max, max, store.ErrRuleSpent)
		}
		return err
	})
	if err != nil {
		return used, fmt.Errorf("sqlite: use rule: %w", err)
	}
	return used, nil
}

// ReleaseRule implements [store.RuleUses].
func (s *Store) ReleaseRule(ctx context.Context, rule, suspendID string) error {
	err := s.writeOn(ctx, false, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM rule_uses WHERE rule = ? AND suspend_id = ?`, rule, suspendID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE rule_counts SET used = used - 1 WHERE rule = ?`, rule)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: release rule: %w", err)
	}
	return nil
}

// RuleUsed implements [store.RuleUses].
func (s *Store) RuleUsed(ctx context.Context, rule string) (used int64, err error) {
	if err := s.db.QueryRowContext(ctx, ruleUsedSQL, rule).Scan(&used); err != nil {
		return 0, fmt.Errorf("sqlite: rule used: %w", err)
	}
	return used, nil
}
