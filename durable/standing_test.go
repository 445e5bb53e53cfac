package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/standing"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// refundIn is the input of the "refund" and "payout" tools.
type refundIn struct {
	Amount int `json:"amount"`
}

// refundCharter ("shop") has a "refund" tool that waits for a person and
// a "payout" tool governed by policy; its model calls the tool the user
// names ("refund 20", "payout 20") and then says the tool's result.
func refundCharter(policy instance.Policy) (*machine.Charter, error) {
	refund := node.NewTool("refund", "refund an amount", func(ctx *node.ToolContext[desk], in refundIn) (string, error) {
		return "", ctx.Suspend("refunds need a person")
	})
	payout := node.NewTool("payout", "pay an amount out", func(ctx *node.ToolContext[desk], in refundIn) (string, error) {
		return "", ctx.Suspend("payouts need a manager", instance.WithPolicy(policy))
	})
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{refund, payout}})
	if err != nil {
		return nil, err
	}
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == message.Tool {
			return scripted.Reply{Text: "result: " + last.Parts[0].Text}, nil
		}
		// "refund 20", or "refund 20 900" for two calls in one reply.
		words := strings.Fields(last.Text())
		var calls []scripted.Call
		for i, w := range words[1:] {
			amount, err := strconv.Atoi(w)
			if err != nil {
				return scripted.Reply{}, err
			}
			calls = append(calls, scripted.Call{ID: fmt.Sprint("c", i+1), Name: words[0], Input: refundIn{Amount: amount}})
		}
		return scripted.Reply{Calls: calls}, nil
	})
	return machine.NewCharter(machine.CharterConfig{Name: "shop", Model: model, Nodes: []*node.Node{n}})
}

// smallRefunds decides refunds of at most 50, twice.
var smallRefunds = standing.Rule{ID: "small-refunds", Tool: "refund", CEL: "input.amount <= 50", MaxUses: 2, Payload: json.RawMessage(`"auto-approved"`)}

func standingRunner(t testing.TB, s store.Store, tenant string, rules ...standing.Rule) *durable.Runner {
	t.Helper()
	c, err := refundCharter(instance.Policy{Subjects: []string{"ana"}})
	require.NoError(t, err)
	set, err := standing.Compile(rules)
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c, Rules: set, Tenant: tenant})
	require.NoError(t, err)
	return r
}

// ask creates machine id and asks for text; it returns the last step.
func ask(t *testing.T, r *durable.Runner, id, text string) machine.Step {
	t.Helper()
	ctx := context.Background()
	_, err := r.Create(ctx, id, "desk", nil)
	require.NoError(t, err)
	steps, err := drain(r.Run(ctx, id, machine.UserText(text)))
	require.NoError(t, err)
	return steps[len(steps)-1]
}

// A rule decides a matching call in the step that suspends it: no save
// announces it pending (BeforeSave), the inbox never lists it, the tool
// gets the rule's payload, a person's late decision is told it is
// resolved, and the history, the event and the audit log name the rule.
// Calls it does not match, or past its uses, wait for people.
func TestStandingRule(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		c, err := refundCharter(instance.Policy{Subjects: []string{"ana"}})
		require.NoError(t, err)
		set, err := standing.Compile([]standing.Rule{smallRefunds,
			{ID: "expired", Tool: "refund", Expires: time.Now().Add(-time.Hour), Payload: json.RawMessage(`"late"`)}})
		require.NoError(t, err)
		var announced []string
		r, err := durable.New(durable.Config{Store: s, Charter: c, Rules: set,
			BeforeSave: func(_ context.Context, _ string, added []store.Suspension) error {
				for _, a := range added {
					announced = append(announced, a.ID)
				}
				return nil
			}})
		require.NoError(t, err)

		last := ask(t, r, "m1", "refund 20")
		require.True(t, last.Done)
		require.False(t, last.NeedsResume())
		require.Empty(t, announced, "no save held the call pending")
		inbox, err := r.Pending(ctx, store.Filter{Status: store.StatusPending})
		require.NoError(t, err)
		require.Empty(t, inbox)
		m, _, err := r.Load(ctx, "m1")
		require.NoError(t, err)
		var ruled string
		for _, msg := range m.History() {
			for _, p := range msg.Parts {
				switch {
				case p.Kind == message.KindToolResult:
					require.Equal(t, "auto-approved", p.Text)
					ruled = p.SuspendID
				case p.Kind == message.KindRecord && p.Name == "decided":
					var rec machine.DecidedRecord
					require.NoError(t, json.Unmarshal(p.Data, &rec))
					require.Equal(t, machine.RuleBy+"small-refunds", rec.By)
				}
			}
		}
		require.NotEmpty(t, ruled)
		require.Equal(t, "result: auto-approved", m.History()[len(m.History())-1].Text())
		_, err = r.Resume(ctx, machine.ResumeInput{SuspendID: ruled, Payload: "no", By: "ana"})
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)

		recs := auditRecords(t, s, nil)
		require.Len(t, recs, 1)
		require.Equal(t, "small-refunds", recs[0].Rule)
		require.Equal(t, machine.RuleBy+"small-refunds", recs[0].By)
		require.Equal(t, machine.DecisionApproved, recs[0].Outcome)
		require.Equal(t, ruled, recs[0].SuspendID)

		// No match (too big, and the rule for it has expired): people decide.
		require.True(t, ask(t, r, "m2", "refund 900").NeedsResume())
		require.Len(t, announced, 1)
		// The second use, then none left.
		require.False(t, ask(t, r, "m3", "refund 10").NeedsResume())
		require.True(t, ask(t, r, "m4", "refund 10").NeedsResume(), "the rule's uses are spent")
		used, err := s.(store.RuleUses).RuleUsed(ctx, "small-refunds")
		require.NoError(t, err)
		require.EqualValues(t, 2, used)
		inbox, err = r.Pending(ctx, store.Filter{Status: store.StatusPending})
		require.NoError(t, err)
		require.Len(t, inbox, 2)
	})
}

// A rule applies within its scope only: the charter, node, machine
// pattern and tenant label must match.
func TestStandingScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		rule := standing.Rule{ID: "acme", Tool: "refund", Payload: json.RawMessage(`"ok"`),
			Scope: standing.Scope{Charter: "shop", Node: "desk", Machine: "acme-*", Tenant: "acme"}}
		acme := standingRunner(t, s, "acme", rule)
		require.False(t, ask(t, acme, "acme-1", "refund 900").NeedsResume())
		require.True(t, ask(t, acme, "globex-1", "refund 900").NeedsResume(), "another machine")
		require.True(t, ask(t, standingRunner(t, s, "globex", rule), "acme-2", "refund 900").NeedsResume(), "another tenant")
		other := rule
		other.Scope.Node = "back"
		require.True(t, ask(t, standingRunner(t, s, "acme", other), "acme-3", "refund 900").NeedsResume(), "another node")
		other = rule
		other.Scope.Charter = "bank"
		require.True(t, ask(t, standingRunner(t, s, "acme", other), "acme-4", "refund 900").NeedsResume(), "another charter")
	})
}

// A governed call is decided by a rule only when its policy allows rules;
// the rule's decision then settles it alone.
func TestStandingPolicy(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		rule := standing.Rule{ID: "payouts", Tool: "payout", Payload: json.RawMessage(`"ok"`)}
		set, err := standing.Compile([]standing.Rule{rule})
		require.NoError(t, err)
		for _, allow := range []bool{false, true} {
			c, err := refundCharter(instance.Policy{Subjects: []string{"ana", "bo"}, Quorum: 2, AllowRules: allow})
			require.NoError(t, err)
			r, err := durable.New(durable.Config{Store: s, Charter: c, Rules: set})
			require.NoError(t, err)
			last := ask(t, r, fmt.Sprint("payout-", allow), "payout 5")
			require.Equal(t, !allow, last.NeedsResume(), "AllowRules %v", allow)
		}
		recs := auditRecords(t, s, nil)
		require.Len(t, recs, 1)
		require.Equal(t, "payouts", recs[0].Rule)
	})
}

// A use whose decision is not saved is given back: here the save fails
// (BeforeSave refuses the other call of the reply), the run fails, and the
// rule's use is free again for the next call.
func TestStandingUseGivenBack(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		c, err := refundCharter(instance.Policy{Subjects: []string{"ana"}})
		require.NoError(t, err)
		one := smallRefunds
		one.MaxUses = 1
		set, err := standing.Compile([]standing.Rule{one})
		require.NoError(t, err)
		refuse := errors.New("no pending refunds today")
		r, err := durable.New(durable.Config{Store: s, Charter: c, Rules: set,
			BeforeSave: func(context.Context, string, []store.Suspension) error { return refuse }})
		require.NoError(t, err)
		_, err = r.Create(ctx, "m1", "desk", nil)
		require.NoError(t, err)
		_, err = drain(r.Run(ctx, "m1", machine.UserText("refund 20 900")))
		require.ErrorIs(t, err, refuse)
		used, err := s.(store.RuleUses).RuleUsed(ctx, one.ID)
		require.NoError(t, err)
		require.Zero(t, used, "the use of the unsaved decision is given back")

		require.False(t, ask(t, standingRunner(t, s, "", one), "m2", "refund 20").NeedsResume(), "the use given back decides")
	})
}

// Rules with a use limit need a store that counts uses.
func TestStandingNeedsCounter(t *testing.T) {
	c, err := refundCharter(instance.Policy{Subjects: []string{"ana"}})
	require.NoError(t, err)
	set, err := standing.Compile([]standing.Rule{smallRefunds})
	require.NoError(t, err)
	_, err = durable.New(durable.Config{Store: struct{ store.Store }{memstore.New()}, Charter: c, Rules: set})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
	require.ErrorContains(t, err, "rule small-refunds: max_uses")
}

// childStanding creates machine MARKOV_MACHINE and, once told to go, asks
// for a small refund under a rule with one use; it says "ruled" when the
// rule decided it, "pending" when it waits for a person.
func childStanding() int {
	return testkit.Child[closingStore, *machine.Charter, *durable.Runner]{
		Open:    openChildStore,
		Charter: func() (*machine.Charter, error) { return refundCharter(instance.Policy{Subjects: []string{"ana"}}) },
		Runner: func(s closingStore, c *machine.Charter) (*durable.Runner, error) {
			one := smallRefunds
			one.MaxUses = 1
			set, err := standing.Compile([]standing.Rule{one})
			if err != nil {
				return nil, err
			}
			return durable.New(durable.Config{Store: s, Charter: c, Rules: set})
		},
	}.Run(func(r *durable.Runner) int {
		ctx := context.Background()
		id := os.Getenv("MARKOV_MACHINE")
		if _, err := r.Create(ctx, id, "desk", nil); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		if err := testkit.AwaitGo(); err != nil {
			return 2
		}
		steps, err := drain(r.Run(ctx, id, machine.UserText("refund 10")))
		switch {
		case err != nil:
			fmt.Println("error:", err)
			return 1
		case steps[len(steps)-1].NeedsResume():
			fmt.Println("pending")
		default:
			fmt.Println("ruled")
		}
		return 0
	})
}

// standingRace has two processes race for a rule's last use on store s:
// one call is decided by the rule, the other waits for a person, and the
// store counts one use.
func standingRace(t *testing.T, s store.Store, env ...string) {
	child := func(id string) *exec.Cmd {
		return testkit.ChildCommand(append([]string{"MARKOV_CHILD=standing", "MARKOV_MACHINE=" + id}, env...)...)
	}
	results, err := testkit.RaceChildren(child("a"), child("b"))
	require.NoError(t, err)
	slices.Sort(results)
	require.Equal(t, []string{"pending", "ruled"}, results)
	used, err := s.(store.RuleUses).RuleUsed(context.Background(), smallRefunds.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, used)
	pending, err := s.ListSuspensions(context.Background(), store.Filter{Status: store.StatusPending})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	recs := auditRecords(t, s, nil)
	require.Len(t, recs, 1)
	require.Equal(t, smallRefunds.ID, recs[0].Rule)
	require.NotEqual(t, pending[0].MachineID, recs[0].MachineID)
}

func TestStandingRaceSQLite(t *testing.T) {
	db := filepath.Join(t.TempDir(), "standing.db")
	standingRace(t, openSQLite(t, db), "MARKOV_DB="+db)
}

func TestStandingRacePostgres(t *testing.T) {
	s, _, schema := pgtest.Open(t)
	standingRace(t, s, "MARKOV_PG_SCHEMA="+schema)
}
