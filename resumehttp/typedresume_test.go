package resumehttp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/serialize"
	"github.com/markov-agents/markov/store"
)

// A payload that fails the suspension's schema answers 400 with the
// violation; the stored machine is byte-identical and the suspension
// still pending, and a good payload then resumes it.
func TestTypedResumeRejected(t *testing.T) {
	forEachEnv(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		mid, sid := e.start(t, "typed: refund 42")
		got := requireOK[resumehttp.Suspension](t, e.call(t, "GET", "/suspensions/"+sid, ""))
		require.JSONEq(t, `{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"],"additionalProperties":false}`,
			string(got.PayloadSchema))
		list := requireOK[resumehttp.SuspensionList](t, e.call(t, "GET", "/suspensions", ""))
		require.Empty(t, list.Suspensions[0].PayloadSchema, "listings carry the index entries only")

		snap := func() ([]byte, int64) {
			m, rev, err := e.runner.Load(ctx, mid)
			require.NoError(t, err)
			b, err := serialize.Marshal(m)
			require.NoError(t, err)
			return b, rev
		}
		data, rev := snap()
		// The answer is short and names the field: it is for the
		// approver, not for a log.
		for body, message := range map[string]string{
			`{"payload": {"approved": "yes"}}`:              "payload: approved: expected boolean, got string",
			`{"payload": {"approved": true, "by": "dana"}}`: "payload: by: unknown field",
			`{"payload": {}}`:                               "payload: approved: required",
			`{"payload": "yes"}`:                            "payload: expected object, got string",
			`{}`:                                            "payload: missing",
		} {
			eb := requireError(t, e.call(t, "POST", resumePath(sid), body), http.StatusBadRequest, "payload_decode")
			require.Equal(t, message, eb.Error)
			data2, rev2 := snap()
			require.Equal(t, data, data2, "the stored machine is byte-identical")
			require.Equal(t, rev, rev2)
		}
		sus, err := e.runner.Suspension(ctx, sid)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, sus.Status)

		sum := requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), `{"payload": {"approved": true}}`))
		require.Equal(t, `result: {"approved": true}`, sum.Text)
	})
}
