package acp_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/acp"
	"github.com/markov-agents/markov/acp/acpdemo"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// sharedStores open two stores on one database: the agent's, and another
// process's (the same store for memstore, which lives in one process).
func sharedStores(t *testing.T) map[string]func(t *testing.T) (agent, other store.Store) {
	out := map[string]func(t *testing.T) (store.Store, store.Store){
		"memstore": func(*testing.T) (store.Store, store.Store) {
			st := memstore.New()
			return st, st
		},
		"sqlite": func(t *testing.T) (store.Store, store.Store) { return sqlitetest.Pair(t) },
	}
	if os.Getenv(pgtest.EnvVar) != "" {
		out["postgres"] = func(t *testing.T) (store.Store, store.Store) {
			st, url, schema := pgtest.Open(t)
			return st, pgtest.OpenIn(t, url, schema)
		}
	}
	return out
}

// TestResumeElsewhereIsEventDriven parks a session and resolves the park
// through another runner on another store of the same database (another
// process): a signal, a resume, a cancellation. The agent checks a
// session every hour when its store has no event feed, so the resumed
// update reaches the client within the test's bound only because the
// machine's event log woke the session's watcher.
func TestResumeElsewhereIsEventDriven(t *testing.T) {
	for name, open := range sharedStores(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				// park parks the session and returns its handle.
				park func(h *harness, id string) string
				// resolve resolves the park through r.
				resolve   func(t *testing.T, r *durable.Runner, handle string)
				suspended string // the suspended update
				resumed   string // the resumed update
				text      string // what the run after it said
			}{{
				name: "signal",
				park: func(h *harness, id string) string {
					require.Equal(h.t, acpsdk.StopReasonEndTurn, h.prompt(id, "wait ci.passed"))
					require.Eventually(h.t, func() bool { return len(h.awaits()) == 1 }, 10*time.Second, time.Millisecond)
					return h.awaits()[0].Meta["handle"].(string)
				},
				resolve: func(t *testing.T, r *durable.Runner, _ string) {
					woken, err := r.Signal(context.Background(), "ci.passed", "green")
					require.NoError(t, err)
					require.Equal(t, 1, woken)
				},
				suspended: "suspended agent",
				resumed:   "resumed condition_fired input=false continue=true",
				text:      `Done: ci.passed happened: "green"`,
			}, {
				name: "resume",
				park: clientPark,
				resolve: func(t *testing.T, r *durable.Runner, handle string) {
					run, err := r.Resume(context.Background(), machine.ResumeInput{SuspendID: handle})
					require.NoError(t, err)
					_, err = testkit.Collect(run.Steps())
					require.NoError(t, err)
				},
				suspended: "suspended client",
				resumed:   "resumed external_event input=false continue=true",
			}, {
				name: "cancel",
				park: clientPark,
				resolve: func(t *testing.T, r *durable.Runner, handle string) {
					run, err := r.Cancel(context.Background(), machine.CancelInput{SuspendID: handle, Reason: "not needed"})
					require.NoError(t, err)
					_, err = testkit.Collect(run.Steps())
					require.NoError(t, err)
				},
				suspended: "suspended client",
				resumed:   "resumed external_event input=false continue=true",
			}} {
				t.Run(tc.name, func(t *testing.T) {
					st, other := open(t)
					h := serveConfig(t, acp.Config{Runner: deskRunner(t, st), Node: acpdemo.NodeName, WatchInterval: time.Hour})
					id := h.newSession()
					handle := tc.park(h, id)
					require.Contains(t, h.cl.take(), tc.suspended)

					tc.resolve(t, deskRunner(t, other), handle)
					resolved := time.Now()
					defer func() { t.Logf("reported %v after the resolution", time.Since(resolved)) }()
					var lines []string
					told := assert.Eventually(t, func() bool {
						lines = append(lines, h.cl.take()...)
						return count(lines, tc.resumed) == 1 && strings.Contains(text(lines), tc.text)
					}, 10*time.Second, time.Millisecond)
					require.True(t, told, "the client is told of the resume from elsewhere: %q", lines)
					require.Equal(t, tc.text, text(lines))
				})
			}
		})
	}
}

// clientPark suspends the idle session for the client and returns the
// park's handle.
func clientPark(h *harness, id string) string {
	h.t.Helper()
	var resp acp.SuspendResponse
	require.NoError(h.t, h.call(acp.MethodSuspend, map[string]any{"sessionId": id, "reason": "later"}, &resp))
	return resp.Handle
}

// eventless hides every capability of a store but store.Store: it keeps
// no event log.
type eventless struct{ store.Store }

// TestResumeElsewhereWithoutEventLog: on a store that keeps no event log,
// the agent checks a parked session every WatchInterval, and finds the
// park resolved elsewhere.
func TestResumeElsewhereWithoutEventLog(t *testing.T) {
	st := eventless{memstore.New()}
	runner := deskRunner(t, st)
	require.False(t, runner.CanWatch())
	h := serve(t, runner, acpdemo.NodeName)
	id := h.newSession()
	require.Equal(t, acpsdk.StopReasonEndTurn, h.prompt(id, "wait ci.passed"))
	signalAndSeeResumed(t, h, st)
}

// logSpy is a SQLite store that notes, of each read of a machine's event
// log, where it started and how many entries it returned, and the
// suspensions looked up; a subscription to machine gated waits until
// gate is closed.
type logSpy struct {
	*sqlite.Store
	reads testkit.Log[logRead]
	finds testkit.Log[string]
	gated string
	gate  chan struct{}
}

// logRead is one read of an event log.
type logRead struct {
	machineID string
	after     int64
	entries   int
}

// ReadEvents implements store.EventLog.
func (s *logSpy) ReadEvents(ctx context.Context, machineID string, afterSeq int64, limit int) ([]store.LogEvent, error) {
	evs, err := s.Store.ReadEvents(ctx, machineID, afterSeq, limit)
	s.reads.Add(logRead{machineID: machineID, after: afterSeq, entries: len(evs)})
	return evs, err
}

// Subscribe implements store.EventLog.
func (s *logSpy) Subscribe(ctx context.Context, machineID string) (store.Subscription, error) {
	if s.gate != nil && machineID == s.gated {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Subscribe(ctx, machineID)
}

// FindSuspension implements store.Index.
func (s *logSpy) FindSuspension(ctx context.Context, suspendID string) (store.Suspension, error) {
	sus, err := s.Store.FindSuspension(ctx, suspendID)
	s.finds.Add(suspendID)
	return sus, err
}

// longParked is a session parked after a long life on a SQLite store.
type longParked struct {
	spy    *logSpy
	runner *durable.Runner // the agent's, on spy
	id     string
	handle string
	// end is the Seq of the last entry of the session's event log.
	end int64
	// open opens another store on the database (another process's).
	open func() store.Store
}

// parkAfterLongLog runs a session through 50 turns, each logged, then
// parks it waiting for ci.passed.
func parkAfterLongLog(t *testing.T, gate chan struct{}) longParked {
	ctx := context.Background()
	path := sqlitetest.Path(t)
	p := longParked{spy: &logSpy{Store: sqlitetest.Open(t, path), gate: gate}, open: func() store.Store { return sqlitetest.Open(t, path) }}
	p.runner = deskRunner(t, p.spy)
	var err error
	p.id, err = p.runner.Create(ctx, "", acpdemo.NodeName, nil)
	require.NoError(t, err)
	p.spy.gated = p.id
	for i := range 50 {
		_, err := testkit.Collect(p.runner.Run(ctx, p.id, machine.UserText(fmt.Sprintf("note %d", i))))
		require.NoError(t, err)
	}
	steps, err := testkit.Collect(p.runner.Run(ctx, p.id, machine.UserText("wait ci.passed")))
	require.NoError(t, err)
	last := steps[len(steps)-1]
	require.True(t, last.NeedsResume(), "the session parks itself")
	p.handle = last.Suspensions[0].SuspendID
	p.end = p.lastSeq(t)
	require.Greater(t, p.end, int64(100), "a long log")
	p.spy.reads.Take()
	p.spy.finds.Take()
	return p
}

// lastSeq is the Seq of the last entry of the session's log.
func (p longParked) lastSeq(t *testing.T) int64 {
	logged, err := p.spy.Store.ReadEvents(context.Background(), p.id, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, logged)
	return logged[len(logged)-1].Seq
}

// load serves the agent on a new connection and loads the session on it.
func (p longParked) load(t *testing.T) *harness {
	h := serveConfig(t, acp.Config{Runner: p.runner, Node: acpdemo.NodeName, WatchInterval: time.Hour})
	_, err := h.conn.Initialize(h.ctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber})
	require.NoError(t, err)
	_, err = h.conn.LoadSession(h.ctx, acpsdk.LoadSessionRequest{SessionId: acpsdk.SessionId(p.id), Cwd: "/", McpServers: []acpsdk.McpServer{}})
	require.NoError(t, err)
	require.Contains(t, h.cl.take(), "suspended agent")
	return h
}

// TestWatchReadsTheLogFromTheLoad: a parked session with a long event
// log, loaded on a new connection, is watched from the end of its log
// as it stood at the load — no read of the log starts before it, and
// the watcher reads only what was logged since — and the resume from
// elsewhere still reaches the client.
func TestWatchReadsTheLogFromTheLoad(t *testing.T) {
	p := parkAfterLongLog(t, nil)
	h := p.load(t)
	// The watcher has subscribed and read the log once before the
	// signal, so that the resume reaches it through the log.
	var reads []logRead
	require.Eventually(t, func() bool {
		reads = append(reads, p.spy.reads.Take()...)
		return slices.ContainsFunc(reads, func(r logRead) bool { return r.machineID == p.id })
	}, 10*time.Second, time.Millisecond)

	signalAndSeeResumed(t, h, p.open())
	since := int(p.lastSeq(t) - p.end)
	entries := 0
	for _, r := range append(reads, p.spy.reads.Take()...) {
		if r.machineID != p.id {
			continue
		}
		require.GreaterOrEqual(t, r.after, p.end, "the watcher reads the log from where it was at the load on, not from %d", r.after)
		entries += r.entries
	}
	require.Positive(t, entries, "the watcher read the resume from the log")
	require.LessOrEqual(t, entries, since, "the watcher reads what was logged after the load only (%d entries before it)", p.end)
	t.Logf("the watcher read %d entries of the log; %d were there before the load", entries, p.end)
}

// TestWatchSeesAResumeBeforeItsSubscription: a park resolved elsewhere
// after the session was loaded and checked, but before its watcher
// subscribed to the event log, is reported all the same: the watcher
// reads the log from the load on, not from where it stood at the
// subscription.
func TestWatchSeesAResumeBeforeItsSubscription(t *testing.T) {
	gate := make(chan struct{})
	p := parkAfterLongLog(t, gate)
	h := p.load(t)
	// The watcher's first check finds the park pending; its
	// subscription waits for the gate.
	require.Eventually(t, func() bool { return slices.Contains(p.spy.finds.Take(), p.handle) }, 10*time.Second, time.Millisecond)
	signalCI(t, p.open())
	close(gate)
	seeResumed(t, h)
	for _, r := range p.spy.reads.Take() {
		if r.machineID == p.id {
			require.GreaterOrEqual(t, r.after, p.end)
		}
	}
}
