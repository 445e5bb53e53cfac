package resumehttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/memstore"
)

// coreRunner hides every optional capability of a durable runner: it is
// only a resumehttp.Runner.
type coreRunner struct{ resumehttp.Runner }

// A runner without the optional capabilities still resumes, cancels and
// shows suspensions (without a payload schema), and refuses replays from
// its own memory; listing and the command endpoints answer 501
// not_implemented and change nothing.
func TestCoreRunnerOnly(t *testing.T) {
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	e := newEnvWith(t, st, func(c *resumehttp.Config) { c.Runner = coreRunner{c.Runner} })
	machineID, suspendID := e.start(t, "refund order 42")
	before := e.fingerprint(t, machineID)

	requireError(t, e.call(t, http.MethodGet, "/suspensions", ""), http.StatusNotImplemented, "not_implemented")
	requireError(t, e.call(t, http.MethodGet, "/machines/"+machineID+"/commands", ""), http.StatusNotImplemented, "not_implemented")
	requireError(t, e.call(t, http.MethodPost, "/machines/"+machineID+"/commands/bump", `{"input":{"by":1}}`),
		http.StatusNotImplemented, "not_implemented")
	e.requireUnchanged(t, before, machineID)

	got := requireOK[resumehttp.Suspension](t, e.call(t, http.MethodGet, "/suspensions/"+suspendID, ""))
	require.Equal(t, machineID, got.MachineID)
	require.Empty(t, got.PayloadSchema)

	resume := e.signed(t, http.MethodPost, resumePath(suspendID), `{"payload":"approved"}`)
	replay := resume.Clone(context.Background())
	replay.Body = io.NopCloser(strings.NewReader(`{"payload":"approved"}`))
	sum := requireOK[resumehttp.Summary](t, do(t, resume))
	require.True(t, sum.Done)
	// Without the store's replay guard, the handler remembers signatures
	// itself, and the first outcome with them.
	require.Equal(t, sum, requireOK[resumehttp.Summary](t, do(t, replay)))
}
