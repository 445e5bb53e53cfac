package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store/sqlite"
)

var start = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// TestRun runs the demo: the expense is pending while the call waits, the
// sweeper does nothing before the deadline and rejects it after, through
// the resume handler.
func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, Run(context.Background(), filepath.Join(t.TempDir(), "e.db"), &Clock{now: start}, &out))
	require.Equal(t, `waiting for a manager until 2026-11-30T09:00:00Z: expense needs a manager's approval
ledger: conference ticket, 420 €, pending
swept 0 before the deadline
swept 1 after the deadline
ledger: conference ticket, 420 €, rejected
`, out.String())
}

// fixture is a runner on a fresh SQLite file with a machine suspended on
// file_expense.
type fixture struct {
	clock     *Clock
	runner    *durable.Runner
	id, susID string
}

func suspended(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	clock := &Clock{now: start}
	charter, err := NewCharter(ScriptedModel(), clock.Now)
	require.NoError(t, err)
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "e.db")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	r, err := durable.New(durable.Config{Store: s, Charter: charter})
	require.NoError(t, err)
	id, err := r.Create(ctx, "", NodeName, nil)
	require.NoError(t, err)
	steps, err := testkit.Collect(r.Run(ctx, id, machine.UserText("file it")))
	require.NoError(t, err)
	last := steps[len(steps)-1]
	require.Len(t, last.Suspensions, 1)
	c := last.Suspensions[0]
	require.Equal(t, start.Add(ApprovalWindow), c.Deadline, "the deadline is on the charter's clock")
	return fixture{clock: clock, runner: r, id: id, susID: c.SuspendID}
}

func (f fixture) ledger(t *testing.T) Ledger {
	t.Helper()
	m, _, err := f.runner.Load(context.Background(), f.id)
	require.NoError(t, err)
	return m.Root().State.(Ledger)
}

// TestTheSweeperUsesTheCharterClock: the wall clock is days before the
// deadline the charter's clock passed, and the sweeper expires the call;
// a minute before the deadline on the charter's clock, it does not.
func TestTheSweeperUsesTheCharterClock(t *testing.T) {
	ctx := context.Background()
	f := suspended(t)
	f.clock.Advance(ApprovalWindow - time.Minute)
	n, err := f.runner.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, "pending", f.ledger(t).Expenses[0].Status)

	f.clock.Advance(time.Minute)
	n, err = f.runner.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "due at the deadline itself")
	require.Equal(t, "rejected", f.ledger(t).Expenses[0].Status, "the on-timeout payload went through the resume handler")
	sp, err := f.runner.Suspension(ctx, f.susID)
	require.NoError(t, err)
	require.Equal(t, "expired", string(sp.Status))
}

// TestAManagerDecidesInTime: a decision before the deadline goes through
// the same handler, and the sweeper later has nothing to expire.
func TestAManagerDecidesInTime(t *testing.T) {
	ctx := context.Background()
	f := suspended(t)
	f.clock.Advance(time.Hour)
	_, err := testkit.Collect(f.runner.Resume(ctx, f.susID, Decision{Approved: true, Note: "ok"}, false))
	require.NoError(t, err)
	require.Equal(t, "approved", f.ledger(t).Expenses[0].Status)

	f.clock.Advance(ApprovalWindow)
	n, err := f.runner.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, "approved", f.ledger(t).Expenses[0].Status)
}

// TestAMalformedDecisionChangesNothing: a payload that is not a Decision
// is refused before the handler runs; the call stays pending and still
// expires at its deadline.
func TestAMalformedDecisionChangesNothing(t *testing.T) {
	ctx := context.Background()
	f := suspended(t)
	_, err := testkit.Collect(f.runner.Resume(ctx, f.susID, map[string]any{"approved": "yes"}, false))
	require.True(t, errors.Is(err, instance.ErrPayloadDecode), "%v", err)
	require.Equal(t, "pending", f.ledger(t).Expenses[0].Status)

	f.clock.Advance(ApprovalWindow)
	n, err := f.runner.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "rejected", f.ledger(t).Expenses[0].Status)
}
