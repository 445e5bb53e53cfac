package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store/memstore"
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
	// testing:clock:begin
	clock := &Clock{now: start}
	charter, err := NewCharter(ScriptedModel(), clock.Now)
	require.NoError(t, err)
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "e.db")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	r, err := durable.New(durable.Config{Store: s, Charter: charter})
	require.NoError(t, err)
	// testing:clock:end
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
	// testing:advance:begin
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
	// testing:advance:end
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
	_, err := resume(ctx, f.runner, f.susID, Decision{Approved: true, Note: "ok"})
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
	_, err := resume(ctx, f.runner, f.susID, map[string]any{"approved": "yes"})
	require.True(t, errors.Is(err, instance.ErrPayloadDecode), "%v", err)
	require.Equal(t, "pending", f.ledger(t).Expenses[0].Status)

	f.clock.Advance(ApprovalWindow)
	n, err := f.runner.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "rejected", f.ledger(t).Expenses[0].Status)
}

// TestTheDeadlineInABubble moves time with testing/synctest instead of a
// clock of its own: the charter reads time.Now, which inside the bubble is
// the bubble's clock, and time.Sleep jumps it forward at once.
func TestTheDeadlineInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// testing:synctest:begin
		ctx := context.Background()
		charter, err := NewCharter(ScriptedModel(), nil) // time.Now: the bubble's clock
		require.NoError(t, err)
		r, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
		require.NoError(t, err)
		id, err := r.Create(ctx, "", NodeName, nil)
		require.NoError(t, err)
		_, err = testkit.Collect(r.Run(ctx, id, machine.UserText("file it")))
		require.NoError(t, err)

		time.Sleep(ApprovalWindow) // no wait: the bubble's clock jumps 48 hours
		n, err := r.Sweep(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		m, _, err := r.Load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "rejected", m.Root().State.(Ledger).Expenses[0].Status)
		// testing:synctest:end
	})
}

// TestADecisionAfterTheDeadlineIsRefused: once the deadline has passed on
// the charter's clock, a manager's decision is refused even before any
// sweep, and changes nothing; the sweep then applies the on-timeout action.
func TestADecisionAfterTheDeadlineIsRefused(t *testing.T) {
	ctx := context.Background()
	f := suspended(t)
	f.clock.Advance(ApprovalWindow)
	_, err := resume(ctx, f.runner, f.susID, Decision{Approved: true})
	require.ErrorIs(t, err, machine.ErrDeadlinePassed)
	require.Equal(t, "pending", f.ledger(t).Expenses[0].Status)
	n, err := f.runner.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "rejected", f.ledger(t).Expenses[0].Status)
}

// resume resumes suspension id of r with payload and runs the machine to
// the end of its run; a refused resume is the error.
func resume(ctx context.Context, r *durable.Runner, id string, payload any) ([]machine.Step, error) {
	run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: payload})
	if err != nil {
		return nil, err
	}
	return testkit.Collect(run.Steps())
}
