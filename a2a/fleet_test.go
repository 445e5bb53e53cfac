package a2a_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// fleetBackend is a fleet on PostgreSQL (skipping, or failing in CI,
// without a database): signals are queued for its workers, deadlines are
// River jobs.
func fleetBackend(t *testing.T, ch *machine.Charter) (*durable.Runner, a2a.Signaler) {
	st, _, _ := pgtest.Open(t)
	f, err := fleet.New(fleet.Config{Store: st, Charter: ch, Workers: 2})
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	t.Cleanup(func() { _ = f.Stop(context.Background()) })
	return f.Runner(), f
}

// untilDone waits, for up to twenty seconds, for the call of m1 to have
// its result, which the fleet's workers bring (no sweeper runs).
func (e *env) untilDone(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return len(e.results(t)) > 0 }, 20*time.Second, 10*time.Millisecond)
}

// On PostgreSQL a push notification is queued for the fleet's workers.
func TestFleetPush(t *testing.T) {
	agent, srv := startGoAgent(t)
	e := newEnvOn(t, fleetBackend, a2a.Config{URL: srv.URL, PushURL: "push", Wait: 50 * time.Millisecond, PollMax: time.Hour},
		scripted.Tool("painter", a2a.Request{Message: "slow"}), scripted.Text("done"))
	e.start(t)
	w := e.pending(t)
	require.NotEmpty(t, w.Conditions().Event)
	close(agent.release)
	e.untilDone(t)
	require.Equal(t, []string{"slow done"}, e.results(t))
}

// On PostgreSQL the polls are the fleet's deadline jobs (River).
func TestFleetPolls(t *testing.T) {
	agent, srv := startGoAgent(t)
	e := newEnvOn(t, fleetBackend, a2a.Config{URL: srv.URL, Wait: 50 * time.Millisecond, PollMin: 20 * time.Millisecond, PollMax: 50 * time.Millisecond},
		scripted.Tool("painter", a2a.Request{Message: "slow"}), scripted.Text("done"))
	e.start(t)
	require.Eventually(t, func() bool { return e.pollsOf(t) >= 1 }, 20*time.Second, 10*time.Millisecond)
	require.Empty(t, e.results(t))
	close(agent.release)
	e.untilDone(t)
	require.Equal(t, []string{"slow done"}, e.results(t))
}
