package resumehttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// stateOf is all a rejected request must leave untouched: the machine's
// fingerprint and its stored row, history and event-log position.
type stateOf struct {
	Fingerprint fingerprint
	Snapshot    *store.Snapshot
}

func (e *env) state(t testing.TB, st store.Store, machineID string) stateOf {
	t.Helper()
	snap, err := st.Load(context.Background(), machineID)
	require.NoError(t, err)
	return stateOf{Fingerprint: e.fingerprint(t, machineID), Snapshot: snap}
}

// fuzzEndpoints are the state-changing endpoints FuzzRejectedRequest
// sends to: method and path of the machine ID, the suspend ID and the
// fuzzed name, each escaped as a path segment.
var fuzzEndpoints = []struct {
	method string
	path   func(mid, sid, name string) string
}{
	{"POST", func(_, sid, _ string) string { return "/suspensions/" + sid + "/resume" }},
	{"DELETE", func(_, sid, _ string) string { return "/suspensions/" + sid }},
	{"POST", func(mid, _, name string) string { return "/machines/" + mid + "/commands/" + name }},
	{"POST", func(mid, _, _ string) string { return "/machines/" + mid + "/suspend" }},
	{"POST", func(_, _, name string) string { return "/events/" + name }},
}

// FuzzRejectedRequest sends fuzzed, correctly signed requests through the
// real handler over a memstore runner to the resume, cancel, command,
// suspend and signal endpoints of a machine parked on a tool call (a
// typed one when typed is set): fuzzed body bytes, command or event name,
// Idempotency-Key and, unless empty, a fuzzed ID in place of the
// machine's and the suspension's. An answer of 400 or more must be a JSON
// error body with a code, never a 500, leave the machine and its stored
// row, history and suspensions exactly as they were, and create no
// machine under a fuzzed ID.
func FuzzRejectedRequest(f *testing.F) {
	st := memstore.New()
	f.Cleanup(func() { _ = st.Close() })
	e := newEnv(f, st)
	f.Add(uint8(0), false, "", "", `{"payload":"yes"}`, "")
	f.Add(uint8(0), true, "", "", `{"payload":{"approved":"yes"}}`, "")
	f.Add(uint8(0), true, "", "", `{"payload":{"approved":true}}`, "")
	f.Add(uint8(0), false, "", "", `{"payload":`, "")
	f.Add(uint8(0), false, "", "", `{"payload":1,"extra":2}`, "")
	f.Add(uint8(0), false, "nope", "", `{}`, "")
	f.Add(uint8(0), false, "../x", "", `[]`, "")
	f.Add(uint8(1), false, "", "", `{"reason":"gone"}`, "")
	f.Add(uint8(1), false, "", "", `{"reason":7}`, "")
	f.Add(uint8(2), false, "", "bump", `{"input":{"by":2}}`, "k1")
	f.Add(uint8(2), false, "", "bump", `{"input":{"by":"two"}}`, "")
	f.Add(uint8(2), false, "", "bump", `{"input":{"by":1000}}`, "")
	f.Add(uint8(2), false, "", "bump", `{"input":{"by":1},"instance_id":"nobody"}`, "")
	f.Add(uint8(2), false, "", "nope", `{}`, "")
	f.Add(uint8(2), false, "", "hold", `{}`, "bad key\x00")
	f.Add(uint8(2), false, "m-none", "bump", `{"input":{"by":1}}`, "")
	f.Add(uint8(3), false, "", "", `{"reason":"lunch","mode":"finish_step"}`, "")
	f.Add(uint8(3), false, "", "", `{"mode":"whenever"}`, "")
	f.Add(uint8(3), false, "", "", `{"resume_when":{"timeout":{"duration_minutes":-1}}}`, "")
	f.Add(uint8(3), false, "", "", `{"resume_when":{"on_event":"a\u0000b"}}`, "")
	f.Add(uint8(4), false, "", "ci.passed", `{"payload":{"ok":true}}`, "")
	f.Add(uint8(4), false, "", "ci.passed", `{"payload":}`, "")
	f.Add(uint8(4), false, "", "a\x7fb", `{}`, "")
	f.Fuzz(func(t *testing.T, ep uint8, typed bool, pathID, name, body, key string) {
		e.clock.Advance(time.Second) // no two requests share a signature
		text := "refund"
		if typed {
			text = "typed: refund"
		}
		mid, sid := e.start(t, text)
		before := e.state(t, st, mid)
		pathMID, pathSID := mid, sid
		if pathID != "" {
			pathMID, pathSID = pathID, pathID
		}
		_, err := st.Load(context.Background(), pathMID)
		existed := err == nil

		route := fuzzEndpoints[int(ep)%len(fuzzEndpoints)]
		req := e.signed(t, route.method, route.path(url.PathEscape(pathMID), url.PathEscape(pathSID), url.PathEscape(name)), body)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		if rec.Code < 400 {
			return
		}
		require.NotEqual(t, http.StatusInternalServerError, rec.Code, "body: %s", rec.Body)
		var eb resumehttp.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb), "body: %s", rec.Body)
		require.NotEmpty(t, eb.Code, "body: %s", rec.Body)
		if d := cmp.Diff(before, e.state(t, st, mid)); d != "" {
			t.Fatalf("%s %s answered %d %s and changed the machine (-before +after):\n%s", req.Method, req.URL.Path, rec.Code, eb.Code, d)
		}
		if _, err := st.Load(context.Background(), pathMID); !existed {
			require.ErrorIs(t, err, store.ErrNotFound, "%s %s answered %d %s and created machine %q", req.Method, req.URL.Path, rec.Code, eb.Code, pathMID)
		}
	})
}
