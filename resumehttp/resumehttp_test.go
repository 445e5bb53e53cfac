package resumehttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

func TestResumeFlow(t *testing.T) {
	forEachEnv(t, func(t *testing.T, e *env) {
		mid, sid := e.start(t, "refund order 42")

		// The suspension is listed and can be looked at.
		list := requireOK[resumehttp.SuspensionList](t, e.call(t, "GET", "/suspensions", ""))
		require.Len(t, list.Suspensions, 1)
		got := requireOK[resumehttp.Suspension](t, e.call(t, "GET", "/suspensions/"+sid, ""))
		call, err := e.runner.Call(context.Background(), sid)
		require.NoError(t, err)
		require.NotEmpty(t, call.Digest)
		want := list.Suspensions[0]
		want.Digest = call.Digest // the one suspension's view has the digest a decision names
		require.Equal(t, want, got)
		require.Equal(t, resumehttp.Suspension{
			ID: sid, MachineID: mid, Status: string(store.StatusPending), Kind: "tool", Name: "ask",
			Reason: "asking about refund order 42", CreatedAt: e.clock.Now(), Digest: call.Digest,
		}, got)

		// A JSON string payload is the tool result text as is.
		sum := requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), `{"payload": "approved"}`))
		require.Equal(t, resumehttp.Summary{
			MachineID: mid, Steps: []string{"end_turn"}, Done: true, Pending: []string{}, Text: "result: approved",
		}, sum)

		// The suspension is no longer pending.
		list = requireOK[resumehttp.SuspensionList](t, e.call(t, "GET", "/suspensions", ""))
		require.Empty(t, list.Suspensions)
		p, err := e.runner.Pending(context.Background(), store.Filter{MachineID: mid})
		require.NoError(t, err)
		require.Empty(t, p)
		m, _, err := e.runner.Load(context.Background(), mid)
		require.NoError(t, err)
		require.Empty(t, m.Pending())
		require.Equal(t, "result: approved", m.History()[len(m.History())-1].Text())
	})
}

func TestResumeObjectPayloadAndError(t *testing.T) {
	e := memEnv(t)
	_, sid := e.start(t, "a")
	sum := requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), `{"payload": {"ok": true, "by": "ann"}}`))
	require.Equal(t, `result: {"ok": true, "by": "ann"}`, sum.Text)

	_, sid = e.start(t, "b")
	sum = requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), `{"payload": "no stock", "is_error": true}`))
	require.Equal(t, "result: no stock (error)", sum.Text)

	// No payload, or null, resolves with an empty result.
	_, sid = e.start(t, "c")
	sum = requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), ""))
	require.Equal(t, "result: ", sum.Text)
	_, sid = e.start(t, "d")
	sum = requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), `{"payload": null}`))
	require.Equal(t, "result: ", sum.Text)
}

func TestCancelFlow(t *testing.T) {
	e := memEnv(t)
	mid, sid := e.start(t, "refund")
	sum := requireOK[resumehttp.Summary](t, e.call(t, "DELETE", "/suspensions/"+sid, `{"reason": "customer left"}`))
	require.Equal(t, resumehttp.Summary{
		MachineID: mid, Steps: []string{"end_turn"}, Done: true, Pending: []string{}, Text: "result: cancelled: customer left (error)",
	}, sum)
	require.Empty(t, e.fingerprint(t, mid).Pending)

	// Without a body.
	_, sid = e.start(t, "again")
	sum = requireOK[resumehttp.Summary](t, e.call(t, "DELETE", "/suspensions/"+sid, ""))
	require.Equal(t, "result: cancelled (error)", sum.Text)
}

func TestCommands(t *testing.T) {
	e := memEnv(t)
	mid := e.create(t)

	list := requireOK[resumehttp.CommandList](t, e.call(t, "GET", "/machines/"+mid+"/commands", ""))
	require.Equal(t, mid, list.MachineID)
	require.Len(t, list.Commands, 2)
	require.Equal(t, "bump", list.Commands[0].Name)
	require.Equal(t, "Add to the count.", list.Commands[0].Description)
	require.Equal(t, "desk", list.Commands[0].Node)
	require.NotEmpty(t, list.Commands[0].InstanceID)
	var schema struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(list.Commands[0].InputSchema, &schema))
	require.Equal(t, "integer", schema.Properties["by"].Type)
	require.Equal(t, "hold", list.Commands[1].Name)

	// Invoke: the command's value comes back; no model call.
	sum := requireOK[resumehttp.Summary](t, e.call(t, "POST", "/machines/"+mid+"/commands/bump", `{"input": {"by": 3}}`))
	require.Equal(t, resumehttp.Summary{
		MachineID: mid, Steps: []string{"command"}, Done: true, Pending: []string{},
		Command: &resumehttp.CommandResult{Name: "bump", InstanceID: list.Commands[0].InstanceID, Value: json.RawMessage("3")},
	}, sum)
	sum = requireOK[resumehttp.Summary](t, e.call(t, "POST", "/machines/"+mid+"/commands/bump",
		`{"input": {"by": 4}, "instance_id": "`+list.Commands[0].InstanceID+`"}`))
	require.JSONEq(t, "7", string(sum.Command.Value))
	require.Zero(t, e.model.Calls())

	// An Idempotency-Key of a command refused (4xx) is given back: the
	// corrected retry with it runs, and then it is spent.
	keyed := func(body string) response {
		req := e.signed(t, "POST", "/machines/"+mid+"/commands/bump", body)
		req.Header.Set("Idempotency-Key", "once")
		return do(t, req)
	}
	eb := requireError(t, keyed(`{"input": {"by": "one"}}`), http.StatusBadRequest, "invalid_input")
	require.Equal(t, "input: by: expected integer, got string", eb.Error, "short, naming the field")
	require.JSONEq(t, "8", string(requireOK[resumehttp.Summary](t, keyed(`{"input": {"by": 1}}`)).Command.Value))
	requireError(t, keyed(`{"input": {"by": 2}}`), http.StatusConflict, "idempotency_key_reused")

	// A command that suspends, then its resume: the payload is its value.
	sum = requireOK[resumehttp.Summary](t, e.call(t, "POST", "/machines/"+mid+"/commands/hold", ""))
	require.NotEmpty(t, sum.Command.SuspendID)
	require.Nil(t, sum.Command.Value)
	require.Equal(t, []string{sum.Command.SuspendID}, sum.Pending)
	sid := sum.Command.SuspendID
	sum = requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), `{"payload": {"who": "bob"}}`))
	require.Equal(t, "hold", sum.Command.Name)
	require.JSONEq(t, `{"who": "bob"}`, string(sum.Command.Value))
	require.Empty(t, sum.Pending)
	require.True(t, sum.Done)
}

func TestListFilters(t *testing.T) {
	e := memEnv(t)
	m1, s1 := e.start(t, "one")
	e.clock.Advance(time.Second)
	_, s2 := e.start(t, "soon: two")
	e.clock.Advance(time.Second)
	m3, s3 := e.start(t, "three")
	deadline := e.clock.Now().Add(-time.Second).Add(time.Minute)

	ids := func(r response) []string {
		var out []string
		for _, s := range requireOK[resumehttp.SuspensionList](t, r).Suspensions {
			out = append(out, s.ID)
		}
		return out
	}
	// Earliest deadline first, then by creation.
	require.Equal(t, []string{s2, s1, s3}, ids(e.call(t, "GET", "/suspensions", "")))
	require.Equal(t, []string{s2, s1, s3}, ids(e.call(t, "GET", "/suspensions?status=pending", "")))
	require.Equal(t, []string{s3}, ids(e.call(t, "GET", "/suspensions?machine="+m3, "")))
	require.Equal(t, []string{s2, s1}, ids(e.call(t, "GET", "/suspensions?limit=2", "")))
	require.Nil(t, ids(e.call(t, "GET", "/suspensions?status=resolved", "")))
	before := deadline.Add(time.Second).Format(time.RFC3339)
	require.Equal(t, []string{s2}, ids(e.call(t, "GET", "/suspensions?deadline_before="+before, "")))
	require.Nil(t, ids(e.call(t, "GET", "/suspensions?deadline_before="+deadline.Format(time.RFC3339), "")))

	sus := requireOK[resumehttp.Suspension](t, e.call(t, "GET", "/suspensions/"+s2, ""))
	require.Equal(t, deadline, sus.Deadline)

	fp := e.fingerprint(t, m1)
	for _, q := range []string{"limit=0", "limit=-1", "limit=x", "deadline_before=tomorrow",
		"status=bogus", "status=Pending", "status=all", "status=%00", "status=pending%20"} {
		requireError(t, e.call(t, "GET", "/suspensions?"+q, ""), http.StatusBadRequest, "bad_request")
	}
	e.requireUnchanged(t, fp, m1)

	// Each way out of pending is its own status, and each can be listed.
	requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(s1), `{"payload":"yes"}`))
	requireOK[resumehttp.Summary](t, e.call(t, "DELETE", "/suspensions/"+s3, `{"reason":"not needed"}`))
	e.clock.Advance(2 * time.Minute)
	n, err := e.runner.Sweep(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for status, want := range map[store.Status][]string{
		store.StatusPending: nil, store.StatusResolved: {s1}, store.StatusExpired: {s2}, store.StatusCancelled: {s3},
	} {
		require.Equal(t, want, ids(e.call(t, "GET", "/suspensions?status="+string(status), "")), "status=%s", status)
	}
	for sid, want := range map[string]store.Status{s1: store.StatusResolved, s2: store.StatusExpired, s3: store.StatusCancelled} {
		got := requireOK[resumehttp.Suspension](t, e.call(t, "GET", "/suspensions/"+sid, ""))
		require.Equal(t, string(want), got.Status)
	}
}

// TestErrors checks every error status over the real listener: the JSON
// body, and that the machine is exactly as before.
func TestErrors(t *testing.T) {
	// Many failed authentications in a row: above the default limit.
	e := newEnvWith(t, memstore.New(), func(c *resumehttp.Config) { c.FailureBurst = 100 })
	mid, sid := e.start(t, "refund")
	now := e.clock.Now()
	window := resumehttp.DefaultWindow

	signedAt := func(at time.Time, method, path, body string) *http.Request {
		req := e.request(t, method, path, body)
		resumehttp.SignRequest(secret, req, []byte(body), at)
		return req
	}
	withHeader := func(req *http.Request, key, value string) *http.Request {
		if value == "" {
			req.Header.Del(key)
		} else {
			req.Header.Set(key, value)
		}
		return req
	}
	ok := e.signed(t, "POST", resumePath(sid), `{"payload":"x"}`)
	goodSig := ok.Header.Get(resumehttp.HeaderSignature)

	tests := []struct {
		name   string
		req    *http.Request
		status int
		code   string
	}{
		{"no headers", e.request(t, "POST", resumePath(sid), `{"payload":"x"}`), 401, "missing_signature"},
		{"no signature", withHeader(e.signed(t, "POST", resumePath(sid), `{}`), resumehttp.HeaderSignature, ""), 401, "missing_signature"},
		{"no timestamp", withHeader(e.signed(t, "POST", resumePath(sid), `{}`), resumehttp.HeaderTimestamp, ""), 401, "missing_signature"},
		{"timestamp not a number", withHeader(e.signed(t, "POST", resumePath(sid), `{}`), resumehttp.HeaderTimestamp, "yesterday"), 401, "malformed_signature"},
		{"signature without prefix", withHeader(e.signed(t, "POST", resumePath(sid), `{}`), resumehttp.HeaderSignature, strings.TrimPrefix(goodSig, "sha256=")), 401, "malformed_signature"},
		{"signature not hex", withHeader(e.signed(t, "POST", resumePath(sid), `{}`), resumehttp.HeaderSignature, "sha256=zz"), 401, "malformed_signature"},
		{"signature too short", withHeader(e.signed(t, "POST", resumePath(sid), `{}`), resumehttp.HeaderSignature, goodSig[:len(goodSig)-2]), 401, "malformed_signature"},
		{"wrong secret", func() *http.Request {
			req := e.request(t, "POST", resumePath(sid), `{"payload":"x"}`)
			resumehttp.SignRequest([]byte("another secret, just as long as the real one"), req, []byte(`{"payload":"x"}`), now)
			return req
		}(), 401, "bad_signature"},
		{"tampered body", func() *http.Request {
			req := e.request(t, "POST", resumePath(sid), `{"payload":"yes"}`)
			resumehttp.SignRequest(secret, req, []byte(`{"payload":"no"}`), now)
			return req
		}(), 401, "bad_signature"},
		{"tampered path", func() *http.Request {
			req := e.request(t, "POST", resumePath(sid), `{}`)
			resumehttp.SignRequest(secret, req, []byte(`{}`), now)
			req.URL.Path = resumePath(sid + "x")
			return req
		}(), 401, "bad_signature"},
		{"tampered query", func() *http.Request {
			req := e.request(t, "GET", "/suspensions?machine="+mid, "")
			resumehttp.SignRequest(secret, req, nil, now)
			req.URL.RawQuery = "machine=other"
			return req
		}(), 401, "bad_signature"},
		{"tampered method", func() *http.Request {
			req := e.request(t, "DELETE", "/suspensions/"+sid, "")
			resumehttp.SignRequest(secret, req, nil, now)
			req.Method = "GET"
			return req
		}(), 401, "bad_signature"},
		{"replay from the past", signedAt(now.Add(-window-time.Second), "POST", resumePath(sid), `{}`), 401, "stale_timestamp"},
		{"timestamp from the future", signedAt(now.Add(window+time.Second), "POST", resumePath(sid), `{}`), 401, "stale_timestamp"},
		{"hostile timestamp", withHeader(e.signed(t, "POST", resumePath(sid), `{}`), resumehttp.HeaderTimestamp, "-9223372036854775808"), 401, "stale_timestamp"},
		{"unsigned request to an unknown path", e.request(t, "GET", "/nope", ""), 401, "missing_signature"},

		{"unknown suspension", e.signed(t, "POST", resumePath("s_nope"), `{"payload":"x"}`), 404, "unknown_suspension"},
		{"get unknown suspension", e.signed(t, "GET", "/suspensions/s_nope", ""), 404, "unknown_suspension"},
		{"cancel unknown suspension", e.signed(t, "DELETE", "/suspensions/s_nope", ""), 404, "unknown_suspension"},
		{"commands of unknown machine", e.signed(t, "GET", "/machines/m_nope/commands", ""), 404, "unknown_machine"},
		{"invoke on unknown machine", e.signed(t, "POST", "/machines/m_nope/commands/bump", `{"input":{"by":1}}`), 404, "unknown_machine"},
		{"invoke on unknown instance", e.signed(t, "POST", "/machines/"+mid+"/commands/bump", `{"input":{"by":1},"instance_id":"nope"}`), 404, "no_target"},
		{"unknown endpoint", e.signed(t, "GET", "/nope", ""), 404, "not_found"},
		{"empty suspend ID", e.signed(t, "GET", "/suspensions/", ""), 404, "not_found"},

		{"malformed JSON", e.signed(t, "POST", resumePath(sid), `{"payload":`), 400, "bad_request"},
		{"not an object", e.signed(t, "POST", resumePath(sid), `"approved"`), 400, "bad_request"},
		{"unknown field", e.signed(t, "POST", resumePath(sid), `{"payload":"x","is_eror":true}`), 400, "bad_request"},
		{"trailing data", e.signed(t, "POST", resumePath(sid), `{"payload":"x"} {}`), 400, "bad_request"},
		{"wrong type", e.signed(t, "POST", resumePath(sid), `{"is_error":"yes"}`), 400, "bad_request"},
		{"malformed cancel body", e.signed(t, "DELETE", "/suspensions/"+sid, `{"reason":1}`), 400, "bad_request"},
		{"malformed invoke body", e.signed(t, "POST", "/machines/"+mid+"/commands/bump", `{"input":}`), 400, "bad_request"},
		{"invalid command input", e.signed(t, "POST", "/machines/"+mid+"/commands/bump", `{"input":{"by":"three"}}`), 400, "invalid_input"},
		{"unknown command", e.signed(t, "POST", "/machines/"+mid+"/commands/launch", `{}`), 400, "unknown_command"},
		{"command breaks the state's validation", e.signed(t, "POST", "/machines/"+mid+"/commands/bump", `{"input":{"by":1000}}`), 400, "invalid_state"},

		{"resume with GET", e.signed(t, "GET", resumePath(sid), ""), 405, "method_not_allowed"},
		{"suspension with PUT", e.signed(t, "PUT", "/suspensions/"+sid, `{}`), 405, "method_not_allowed"},
		{"list with POST", e.signed(t, "POST", "/suspensions", `{}`), 405, "method_not_allowed"},
		{"commands with DELETE", e.signed(t, "DELETE", "/machines/"+mid+"/commands", ""), 405, "method_not_allowed"},
		{"invoke with GET", e.signed(t, "GET", "/machines/"+mid+"/commands/bump", ""), 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.fingerprint(t, mid)
			r := do(t, tt.req)
			requireError(t, r, tt.status, tt.code)
			if tt.status == http.StatusMethodNotAllowed {
				require.NotEmpty(t, r.Header.Get("Allow"))
			}
			e.requireUnchanged(t, before, mid)
		})
	}
	// Each command on the machine was refused: its state is as created.
	m, _, err := e.runner.Load(context.Background(), mid)
	require.NoError(t, err)
	require.Equal(t, counter{}, m.Root().State)
	require.Equal(t, 1, e.model.Calls(), "only start called the model")
	require.Contains(t, e.logs.String(), "code=bad_signature")
}

func TestWindowEdges(t *testing.T) {
	e := memEnv(t)
	_, sid := e.start(t, "x")
	for _, d := range []time.Duration{-resumehttp.DefaultWindow, resumehttp.DefaultWindow} {
		req := e.request(t, "GET", "/suspensions/"+sid, "")
		resumehttp.SignRequest(secret, req, nil, e.clock.Now().Add(d))
		requireOK[resumehttp.Suspension](t, do(t, req))
	}
}

func TestOversizedBody(t *testing.T) {
	e := memEnv(t)
	mid, sid := e.start(t, "x")
	before := e.fingerprint(t, mid)
	body := `{"payload":"` + strings.Repeat("a", resumehttp.DefaultMaxBody) + `"}`
	requireError(t, e.call(t, "POST", resumePath(sid), body), http.StatusRequestEntityTooLarge, "body_too_large")
	e.requireUnchanged(t, before, mid)

	// Just under the limit is fine.
	body = `{"payload":"` + strings.Repeat("a", resumehttp.DefaultMaxBody-20) + `"}`
	sum := requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), body))
	require.True(t, sum.Done)
}

// rememberedResolved reports whether the runner still finds a suspension
// once it is resolved (its index keeps resolved entries). When it does, a
// second resume is refused before the machine is loaded (409
// already_resolved); when it does not, the ID is unknown to the index and
// the answer is 404 unknown_suspension.
func rememberedResolved(t *testing.T, e *env, sid string) bool {
	t.Helper()
	_, err := e.runner.Suspension(context.Background(), sid)
	if err != nil {
		require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
		t.Log("the runner's index drops resolved suspensions: a late second resume is a 404, not a 409")
		return false
	}
	return true
}

func TestDoubleResume(t *testing.T) {
	e := memEnv(t)
	mid, sid := e.start(t, "x")
	requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(sid), `{"payload":"first"}`))
	before := e.fingerprint(t, mid)
	status, code := http.StatusConflict, "already_resolved"
	if !rememberedResolved(t, e, sid) {
		status, code = http.StatusNotFound, "unknown_suspension"
	}
	requireError(t, e.call(t, "POST", resumePath(sid), `{"payload":"second"}`), status, code)
	requireError(t, e.call(t, "DELETE", "/suspensions/"+sid, ""), status, code)
	e.requireUnchanged(t, before, mid)
	m, _, err := e.runner.Load(context.Background(), mid)
	require.NoError(t, err)
	require.Equal(t, "result: first", m.History()[len(m.History())-1].Text())
}

func TestDeadlinePassed(t *testing.T) {
	e := memEnv(t)
	mid, sid := e.start(t, "soon: quick")
	e.clock.Advance(2 * time.Minute)
	before := e.fingerprint(t, mid)
	requireError(t, e.call(t, "POST", resumePath(sid), `{"payload":"late"}`), http.StatusGone, "deadline_passed")
	e.requireUnchanged(t, before, mid)
	require.Equal(t, 1, e.model.Calls())

	// The sweeper applies the on-timeout action instead.
	n, err := e.runner.Sweep(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, e.fingerprint(t, mid).Pending)
}

// TestConcurrentResume resumes one suspension from 20 clients at once:
// exactly one wins, the others are refused, and the machine saw one
// resume.
func TestConcurrentResume(t *testing.T) {
	e := memEnv(t)
	mid, sid := e.start(t, "race")
	reqs := make([]*http.Request, 20)
	for i := range reqs {
		reqs[i] = e.signed(t, "POST", resumePath(sid), `{"payload":"r`+string(rune('a'+i))+`"}`)
	}
	statuses := testkit.Race(len(reqs), func(i int) response {
		resp, err := http.DefaultClient.Do(reqs[i])
		if err != nil {
			return response{Status: -1, Body: []byte(err.Error())}
		}
		defer resp.Body.Close()
		var eb resumehttp.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return response{Status: resp.StatusCode, Body: []byte(eb.Code)}
	})

	remembered := rememberedResolved(t, e, sid)
	won := 0
	for i, r := range statuses {
		switch {
		case r.Status == http.StatusOK:
			won++
		case r.Status == http.StatusConflict:
			require.Contains(t, []string{"already_resolved", "conflict"}, string(r.Body), "client %d", i)
		case r.Status == http.StatusNotFound && !remembered:
			require.Equal(t, "unknown_suspension", string(r.Body), "client %d", i)
		default:
			t.Fatalf("client %d: status %d (%s)", i, r.Status, r.Body)
		}
	}
	require.Equal(t, 1, won)

	// One resume reached the machine: one more model call, one result.
	require.Equal(t, 2, e.model.Calls())
	m, _, err := e.runner.Load(context.Background(), mid)
	require.NoError(t, err)
	require.Len(t, testkit.SuspendParts(m.History(), sid), 1)
	require.Empty(t, m.Pending())
}

// fakeRunner answers from fixed values, for the paths a real runner
// reaches only through failures.
type fakeRunner struct {
	resumehttp.Runner // nil: unused methods panic
	sus               store.Suspension
	err               error
}

func (f fakeRunner) Suspension(context.Context, string) (store.Suspension, error) {
	return f.sus, f.err
}

func (f fakeRunner) Call(context.Context, string) (instance.SuspendedCall, error) {
	return instance.SuspendedCall{}, f.err
}

func (f fakeRunner) Pending(context.Context, store.Filter) ([]store.Suspension, error) {
	return nil, f.err
}

func fakeServer(t *testing.T, r resumehttp.Runner, logs *syncBuffer) *env {
	t.Helper()
	h, err := resumehttp.New(resumehttp.Config{Runner: r, Secret: secret, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	e := &env{clock: testkit.NewClock(time.Now()), srv: httptest.NewServer(h), logs: logs}
	t.Cleanup(e.srv.Close)
	return e
}

// A suspension the index knows as no longer pending is refused without
// running anything.
func TestResolvedInIndex(t *testing.T) {
	e := fakeServer(t, fakeRunner{sus: store.Suspension{ID: "s1", MachineID: "m1", Status: "resolved"}}, &syncBuffer{})
	requireError(t, e.call(t, "POST", resumePath("s1"), `{"payload":1}`), http.StatusConflict, "already_resolved")
	requireError(t, e.call(t, "DELETE", "/suspensions/s1", ""), http.StatusConflict, "already_resolved")
	sus := requireOK[resumehttp.Suspension](t, e.call(t, "GET", "/suspensions/s1", ""))
	require.Equal(t, "resolved", sus.Status)
}

func TestInternalErrorDoesNotLeak(t *testing.T) {
	logs := &syncBuffer{}
	e := fakeServer(t, fakeRunner{err: errors.New("pq: connection to 10.0.0.7 refused")}, logs)
	for _, path := range []string{"/suspensions/s1", "/suspensions"} {
		eb := requireError(t, e.call(t, "GET", path, ""), http.StatusInternalServerError, "internal")
		require.Equal(t, "internal error", eb.Error)
	}
	require.Contains(t, logs.String(), "10.0.0.7")
	require.Contains(t, logs.String(), "level=ERROR")
}

func TestNew(t *testing.T) {
	r := fakeRunner{}
	for name, cfg := range map[string]resumehttp.Config{
		"no runner":        {Secret: secret},
		"no secret":        {Runner: r},
		"short secret":     {Runner: r, Secret: []byte("short")},
		"negative window":  {Runner: r, Secret: secret, Window: -time.Second},
		"negative maxbody": {Runner: r, Secret: secret, MaxBody: -1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := resumehttp.New(cfg)
			require.Error(t, err)
		})
	}
	_, err := resumehttp.New(resumehttp.Config{Runner: r, Secret: secret})
	require.NoError(t, err)
}

// The handler keeps its own copy of the secret.
func TestSecretCopied(t *testing.T) {
	key := append([]byte(nil), secret...)
	h, err := resumehttp.New(resumehttp.Config{Runner: fakeRunner{sus: store.Suspension{ID: "s1", Status: "pending"}}, Secret: key})
	require.NoError(t, err)
	key[0] ^= 0xff
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest("GET", srv.URL+"/suspensions/s1", nil)
	require.NoError(t, err)
	resumehttp.SignRequest(secret, req, nil, time.Now())
	requireOK[resumehttp.Suspension](t, do(t, req))
}

func TestRedeliveriesRunNothing(t *testing.T) {
	e := memEnv(t)
	mid := e.create(t)
	path := "/machines/" + mid + "/commands/bump"
	body := `{"input": {"by": 1}}`
	first := e.signed(t, "POST", path, body)
	replay := first.Clone(context.Background())
	replay.Body = io.NopCloser(strings.NewReader(body))
	sum := requireOK[resumehttp.Summary](t, do(t, first))
	before := e.fingerprint(t, mid)
	// A second delivery runs nothing: it gets the first one's outcome.
	require.Equal(t, sum, requireOK[resumehttp.Summary](t, do(t, replay)))
	e.requireUnchanged(t, before, mid)

	// The same invocation again, told apart by a request ID, runs.
	sum = requireOK[resumehttp.Summary](t, e.call(t, "POST", path, `{"input": {"by": 1}, "request_id": "2"}`))
	require.JSONEq(t, "2", string(sum.Command.Value))

	// Reads may repeat.
	get := e.signed(t, "GET", "/suspensions", "")
	requireOK[resumehttp.SuspensionList](t, do(t, get))
	again := get.Clone(context.Background())
	requireOK[resumehttp.SuspensionList](t, do(t, again))
}

// Redeliveries of a signed request run nothing and are no failed
// authentications: a sender that delivers one request many times gets
// the first outcome each time, is not rate-limited, and its next request
// is served.
func TestRedeliveriesAreNotFailures(t *testing.T) {
	e := newEnvWith(t, memstore.New(), func(c *resumehttp.Config) {
		c.FailureBurst, c.FailureRefill = 2, time.Hour
	})
	mid := e.create(t)
	path := "/machines/" + mid + "/commands/bump"
	body := `{"input": {"by": 1}}`
	first := e.signed(t, "POST", path, body)
	sum := requireOK[resumehttp.Summary](t, do(t, first))
	for range 10 {
		replay := first.Clone(context.Background())
		replay.Body = io.NopCloser(strings.NewReader(body))
		require.Equal(t, sum, requireOK[resumehttp.Summary](t, do(t, replay)))
	}
	requireOK[resumehttp.Summary](t, e.call(t, "POST", path, `{"input": {"by": 1}, "request_id": "2"}`))
}
