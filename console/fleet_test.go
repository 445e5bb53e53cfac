package console_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// TestFleetView: on a fleet, a message accepted while no worker runs shows
// as queued work; once workers run the machine to its approval, its
// deadline shows as scheduled work.
func TestFleetView(t *testing.T) {
	ctx := context.Background()
	st, _, _ := pgtest.Open(t)
	f, err := fleet.New(fleet.Config{Store: st, Charter: newCharter(t), Workers: 2})
	require.NoError(t, err)
	s := newStack(t, console.Config{Runner: f.Runner(), Fleet: f})
	_, err = f.Runner().Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	_, err = f.Send(ctx, "m1", message.UserText("refund order 7"))
	require.NoError(t, err)

	c := signedIn(t, s, "ops")
	status, body := c.get("/ui/fleet")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<a href="/ui/fleet">Fleet</a>`)
	require.Regexp(t, `(?s)id="fleet-queued">.*<a href="machines/m1">m1</a>.*markov_run.*id="fleet-scheduled"`, body)

	require.NoError(t, f.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.Stop(sctx)
	})
	require.Eventually(t, func() bool {
		pending, err := f.Runner().Pending(ctx, store.Filter{})
		return err == nil && len(pending) == 1
	}, 30*time.Second, 20*time.Millisecond)
	pending, err := f.Runner().Pending(ctx, store.Filter{})
	require.NoError(t, err)

	_, body = c.get("/ui/fleet")
	require.Regexp(t, `(?s)id="fleet-scheduled">.*<a href="machines/m1">m1</a><br><a class="id" href="suspensions/`+pending[0].ID+`">.*markov_expire`, body)
	require.Contains(t, body, `<meta http-equiv="refresh" content="5">`)

	// Once the suspension is settled, its deadline job (due later, to find
	// nothing) is not shown.
	_, err = f.AcceptCancel(ctx, machine.CancelInput{SuspendID: pending[0].ID, Reason: "not needed", By: "ops"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pending, err := f.Runner().Pending(ctx, store.Filter{})
		return err == nil && len(pending) == 0
	}, 30*time.Second, 20*time.Millisecond)
	o, err := f.Overview(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, o.Scheduled)
	_, body = c.get("/ui/fleet")
	require.NotContains(t, body, `suspensions/`+pending[0].ID)
}

// TestFleetViewWithoutFleet: without a fleet the page says what it needs,
// and no page links to it.
func TestFleetViewWithoutFleet(t *testing.T) {
	s := newStack(t, console.Config{})
	c := signedIn(t, s, "ops")
	status, body := c.get("/ui/fleet")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "needs markov on PostgreSQL")
	_, body = c.get("/ui/machines")
	require.NotContains(t, body, `href="/ui/fleet"`)
}

// TestParkedWithoutFleet: on SQLite, the machines page lists the machines
// the sweeper parked, with their errors.
func TestParkedWithoutFleet(t *testing.T) {
	s, _ := parked(t, "m1", 7)
	c := signedIn(t, s, "ops")
	_, body := c.get("/ui/machines")
	require.Equal(t, "waiting", machineStatus(t, body, "m1"))
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: s.path})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Park(context.Background(), "m1", "decode machine m1: bad tree", time.Now()))
	status, body := c.get("/ui/machines")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "parked", machineStatus(t, body, "m1"))
	require.Contains(t, body, `<pre class="error">decode machine m1: bad tree</pre>`)
	_, body = c.get("/ui/machines/m1")
	require.Contains(t, body, "given up after its last attempt", "the machine page says it is parked")
	require.Contains(t, body, `<pre class="error">decode machine m1: bad tree</pre>`)
	require.Contains(t, body, `action="/ui/machines/m1/retry"`)
}
