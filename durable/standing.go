package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/standing"
	"github.com/markov-agents/markov/store"
)

// ruleUse is a use of a standing rule that a session's decider took
// from the store and no save has recorded yet.
type ruleUse struct {
	rule  string
	entry store.Suspension
}

// decider is a session's machine.Decider: it matches the runner's rules
// and takes a use of the first that matches and has one left. The leaves
// of a round may ask it at once.
type decider struct {
	s    *session
	mu   sync.Mutex
	uses []ruleUse
}

// take returns the uses taken so far and forgets them.
func (d *decider) take() []ruleUse {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.uses
	d.uses = nil
	return u
}

// Decide implements machine.Decider. A store that fails is logged and
// leaves the call to people.
func (d *decider) Decide(ctx context.Context, node string, call *instance.SuspendedCall) (string, json.RawMessage, bool) {
	r := d.s.r
	w := standing.Where{Charter: r.charter.Name(), Node: node, Machine: d.s.id, Tenant: r.tenant}
	for _, rule := range r.rules.Match(w, call, r.charter.Now()) {
		if ru, ok := r.store.(store.RuleUses); ok {
			_, err := ru.UseRule(ctx, rule.ID, call.SuspendID, d.s.id, rule.MaxUses)
			if errors.Is(err, store.ErrRuleSpent) {
				continue
			}
			if err != nil {
				r.log.WarnContext(ctx, "markov: standing rule not applied", "machine", d.s.id, "rule", rule.ID, "suspend_id", call.SuspendID, "error", err)
				return "", nil, false
			}
		}
		d.mu.Lock()
		d.uses = append(d.uses, ruleUse{rule: rule.ID, entry: store.Suspension{
			ID: call.SuspendID, MachineID: d.s.id, Status: store.StatusResolved, Kind: string(call.Kind),
			Name: call.Name, Reason: call.Reason, Deadline: call.Deadline, CreatedAt: call.SuspendedAt,
		}})
		d.mu.Unlock()
		return rule.ID, rule.Payload, true
	}
	return "", nil, false
}

// bindRules hands the session's machine a decider when the runner has
// standing rules.
func (s *session) bindRules() {
	if s.r.rules.Len() > 0 {
		s.rules = &decider{s: s}
		s.m.SetDecider(s.rules)
	}
}

// ruled returns the index entries, resolved, of the calls the decisions
// ds (about to be saved) made by rule — a late resume of one is told it
// is resolved — and their uses, to give back if the save fails. The uses
// of rulings that no decision carries (their step failed before it
// recorded the call) are given back now.
func (s *session) ruled(ctx context.Context, ds []machine.Decided) ([]store.Suspension, []ruleUse) {
	if s.rules == nil {
		return nil, nil
	}
	var entries []store.Suspension
	var kept []ruleUse
	for _, u := range s.rules.take() {
		if slices.ContainsFunc(ds, func(d machine.Decided) bool { return d.SuspendID == u.entry.ID && d.Decision.Rule == u.rule }) {
			entries, kept = append(entries, u.entry), append(kept, u)
		} else {
			s.releaseUse(ctx, u)
		}
	}
	return entries, kept
}

// releaseUses gives back the uses no save recorded: the save failed, or
// the run ended without one.
func (s *session) releaseUses(ctx context.Context, uses []ruleUse) {
	for _, u := range uses {
		s.releaseUse(ctx, u)
	}
}

func (s *session) releaseUse(ctx context.Context, u ruleUse) {
	ru, ok := s.r.store.(store.RuleUses)
	if !ok {
		return
	}
	if err := ru.ReleaseRule(context.WithoutCancel(ctx), u.rule, u.entry.ID); err != nil {
		s.r.log.WarnContext(ctx, "markov: standing rule use not given back", "machine", s.id, "rule", u.rule, "suspend_id", u.entry.ID, "error", err)
	}
}

// releaseUnsaved gives back the uses of the session's decider that no
// save recorded, at the end of a run.
func (s *session) releaseUnsaved(ctx context.Context) {
	if s.rules != nil {
		s.releaseUses(ctx, s.rules.take())
	}
}

// checkRules refuses rules with MaxUses on a store that cannot count
// them, naming the rule.
func checkRules(cfg Config) error {
	if _, ok := cfg.Store.(store.RuleUses); ok {
		return nil
	}
	for _, r := range cfg.Rules.Rules() {
		if r.MaxUses > 0 {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, &standing.RuleError{Rule: r.ID, Field: "max_uses", Err: errors.New("the store cannot count uses (store.RuleUses)")})
		}
	}
	return nil
}
