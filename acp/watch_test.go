package acp_test

import (
	"context"
	"os"
	"path/filepath"
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
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// sharedStores open two stores on one database: the agent's, and another
// process's (the same store for memstore, which lives in one process).
func sharedStores(t *testing.T) map[string]func(t *testing.T) (agent, other store.Store) {
	out := map[string]func(t *testing.T) (store.Store, store.Store){
		"memstore": func(*testing.T) (store.Store, store.Store) {
			st := memstore.New()
			return st, st
		},
		"sqlite": func(t *testing.T) (store.Store, store.Store) {
			path := filepath.Join(t.TempDir(), "acp.db")
			open := func() store.Store {
				st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
			return open(), open()
		},
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
					_, err := testkit.Collect(r.Resume(context.Background(), handle, nil, false))
					require.NoError(t, err)
				},
				suspended: "suspended client",
				resumed:   "resumed external_event input=false continue=true",
			}, {
				name: "cancel",
				park: clientPark,
				resolve: func(t *testing.T, r *durable.Runner, handle string) {
					_, err := testkit.Collect(r.Cancel(context.Background(), handle, "not needed"))
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
