package durable_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// remindRunner runs, on s and clock, a till whose "pay" tool waits an
// hour for bo or cy, reminding them every 20 minutes, and is denied
// when nobody answers.
func remindRunner(t *testing.T, s store.Store, clock func() time.Time) *durable.Runner {
	t.Helper()
	p := instance.Policy{Subjects: []string{"bo", "cy"}, Remind: 20 * time.Minute}
	pay := node.NewTool("pay", "pay an amount", func(ctx *node.ToolContext[desk], in spendIn) (string, error) {
		return "", ctx.Suspend("payment needs approval", instance.WithPolicy(p), instance.WithTimeout(time.Hour), instance.OnTimeoutDeny("nobody answered"))
	})
	n, err := node.New("till", node.Config[desk]{Tools: []node.Tool[desk]{pay}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: payModel("done"), Nodes: []*node.Node{n}, Clock: clock})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c})
	require.NoError(t, err)
	return r
}

// sweepBoth sweeps with both runners at once and returns how many
// suspensions they swept together.
func sweepBoth(t *testing.T, a, b *durable.Runner) int {
	t.Helper()
	var wg sync.WaitGroup
	counts := make([]int, 2)
	errs := make([]error, 2)
	for i, r := range []*durable.Runner{a, b} {
		wg.Go(func() { counts[i], errs[i] = r.Sweep(context.Background(), 0) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	return counts[0] + counts[1]
}

// lifecycle returns the lifecycle event kinds of machine id's log, up to
// and including the first of last.
func lifecycle(t *testing.T, r *durable.Runner, id string, last machine.EventKind) []machine.EventKind {
	t.Helper()
	var kinds []machine.EventKind
	for e, err := range r.Watch(context.Background(), id, 0) {
		require.NoError(t, err)
		switch e.Kind {
		case machine.EventReminded, machine.EventResumed, machine.EventExpired, machine.EventEscalated:
			kinds = append(kinds, e.Kind)
		}
		if e.Kind == last {
			break
		}
	}
	return kinds
}

// On each store, two runners sweeping at once: a payment that waits an
// hour with a reminder every 20 minutes is reminded at 20 and 40
// minutes, once each, each reminder an event on the machine's log and an
// audit entry, the deadline unchanged; a decision after the reminders
// resolves the call; a call nobody decides is still denied at its
// deadline, with no reminder at it.
func TestRemindersBeforeDeadline(t *testing.T) {
	pairs := map[string]func(t *testing.T) (store.Store, store.Store){
		"memstore": func(t *testing.T) (store.Store, store.Store) { s := memstore.New(); return s, s },
		"sqlite":   func(t *testing.T) (store.Store, store.Store) { return sqlitetest.Pair(t) },
	}
	if os.Getenv(pgtest.EnvVar) != "" {
		pairs["postgres"] = func(t *testing.T) (store.Store, store.Store) {
			s, url, schema := pgtest.Open(t)
			return s, pgtest.OpenIn(t, url, schema)
		}
	}
	for name, pair := range pairs {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s1, s2 := pair(t)
			start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
			clock := testkit.NewClock(start)
			r1, r2 := remindRunner(t, s1, clock.Now), remindRunner(t, s2, clock.Now)
			decided := governedCall(t, r1, "till-a", "ana")
			governedCall(t, r2, "till-b", "ana")
			require.Equal(t, start.Add(20*time.Minute), decided.RemindAt.UTC(), "the first reminder is due 20 minutes after the call")
			pending, err := r1.Pending(ctx, store.Filter{MachineID: "till-a"})
			require.NoError(t, err)
			require.Equal(t, start.Add(20*time.Minute), pending[0].RemindAt.UTC(), "the index knows the reminder")

			clock.Set(start.Add(19 * time.Minute))
			require.Zero(t, sweepBoth(t, r1, r2), "nothing is due before the first reminder")
			for _, at := range []time.Duration{20, 40} {
				clock.Set(start.Add(at * time.Minute))
				require.Equal(t, 2, sweepBoth(t, r1, r2), "at %d minutes each call is reminded once", at)
				require.Zero(t, sweepBoth(t, r1, r2), "and not again")
				for _, id := range []string{"till-a", "till-b"} {
					pending, err := r2.Pending(ctx, store.Filter{MachineID: id})
					require.NoError(t, err)
					require.Len(t, pending, 1, "a reminder leaves the call pending")
					require.Equal(t, start.Add(time.Hour), pending[0].Deadline.UTC(), "and its deadline where it was")
					want := start.Add((at + 20) * time.Minute)
					if at == 40 {
						want = time.Time{} // the next would be at the deadline
					}
					require.Equal(t, want, pending[0].RemindAt.UTC())
				}
			}

			clock.Set(start.Add(50 * time.Minute))
			call, err := r2.Call(ctx, decided.SuspendID)
			require.NoError(t, err)
			require.Equal(t, decided.Digest, call.Digest, "a reminder changes nothing a decision names")
			steps, err := runSteps(r2.Resume(ctx, payDecision(call, "bo")))
			require.NoError(t, err, "a decision after the reminders is not past the deadline")
			require.True(t, steps[len(steps)-1].Done)

			clock.Set(start.Add(time.Hour))
			require.Equal(t, 1, sweepBoth(t, r1, r2), "the undecided call meets its deadline")
			m, _, err := r1.Load(ctx, "till-b")
			require.NoError(t, err)
			require.Empty(t, m.Pending())

			require.Equal(t, []machine.EventKind{machine.EventReminded, machine.EventReminded, machine.EventResumed},
				lifecycle(t, r1, "till-a", machine.EventResumed))
			require.Equal(t, []machine.EventKind{machine.EventReminded, machine.EventReminded, machine.EventExpired},
				lifecycle(t, r2, "till-b", machine.EventExpired))
			var outcomes []string
			for _, rec := range auditRecords(t, s1, nil) {
				outcomes = append(outcomes, rec.MachineID+" "+rec.Outcome)
			}
			require.ElementsMatch(t, []string{"till-a reminded", "till-b reminded", "till-a reminded", "till-b reminded",
				"till-a approved", "till-b denied"}, outcomes)
		})
	}
}
