package resumehttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
)

func suspendPath(machineID string) string { return "/machines/" + machineID + "/suspend" }

func TestCallerSuspendAndSignal(t *testing.T) {
	forEachEnv(t, func(t *testing.T, e *env) {
		id, ask := e.start(t, "first")
		res := requireOK[resumehttp.SuspendResult](t, e.call(t, "POST", suspendPath(id),
			`{"reason":"review","mode":"interrupt_immediate","resume_when":{"on_event":"ci.passed","timeout":{"duration_minutes":90,"on_timeout":"resume_with_input","input":"late"}}}`))
		require.NotEmpty(t, res.Handle)
		require.True(t, res.Applied)
		require.Equal(t, id, res.MachineID)
		require.Equal(t, "interrupt_immediate", res.Mode)
		require.Equal(t, "review", res.Reason)
		require.Equal(t, e.clock.Now(), res.SuspendedAt)
		require.Equal(t, res.SuspendedAt.Add(90*time.Minute), res.Deadline)
		require.Equal(t, &resumehttp.ResumeWhen{OnEvent: "ci.passed",
			Timeout: &resumehttp.ResumeTimeout{DurationMinutes: 90, OnTimeout: "resume_with_input"}}, res.ResumeWhen)
		require.Contains(t, res.Summary, `or the event "ci.passed"`)

		got := requireOK[resumehttp.Suspension](t, e.call(t, "GET", "/suspensions/"+res.Handle, ""))
		require.Equal(t, "instance", got.Kind)

		sig := requireOK[resumehttp.SignalResult](t, e.call(t, "POST", "/events/ci.passed", `{"payload":"go on"}`))
		require.Equal(t, resumehttp.SignalResult{Event: "ci.passed", Woken: 1}, sig)
		sig = requireOK[resumehttp.SignalResult](t, e.call(t, "POST", "/events/ci.passed", `{"payload":"go on","request_id":"2"}`))
		require.Zero(t, sig.Woken, "woken once")
		pending, err := e.runner.Pending(t.Context(), store.Filter{MachineID: id})
		require.NoError(t, err)
		require.Len(t, pending, 1)
		require.Equal(t, ask, pending[0].ID, "the tool's own suspension is still pending")

		// An event name may hold slashes.
		sig = requireOK[resumehttp.SignalResult](t, e.call(t, "POST", "/events/file.changed:src/lib.rs", ""))
		require.Equal(t, "file.changed:src/lib.rs", sig.Event)
	})
}

func TestSuspendEndpointRefusesBadRequests(t *testing.T) {
	e := memEnv(t)
	id, _ := e.start(t, "first")
	before := e.fingerprint(t, id)
	for _, c := range []struct {
		body, code string
		status     int
	}{
		{`{"mode":"later"}`, "invalid_suspend", http.StatusBadRequest},
		{`{"resume_when":{"on_event":"a\u0000b"}}`, "invalid_event", http.StatusBadRequest},
		{`{"resume_when":{"timeout":{"duration_minutes":0}}}`, "invalid_suspend", http.StatusBadRequest},
		{`{"resume_when":{"timeout":{"duration_minutes":1e12}}}`, "invalid_suspend", http.StatusBadRequest},
		{`{"resume_when":{"timeout":{"duration_minutes":5,"on_timeout":"explode"}}}`, "invalid_suspend", http.StatusBadRequest},
		{`{"resume_when":{"timeout":{"duration_minutes":5,"input":"x"}}}`, "invalid_suspend", http.StatusBadRequest},
		{`{"reason":1}`, "bad_request", http.StatusBadRequest},
		{`{"extra":true}`, "bad_request", http.StatusBadRequest},
	} {
		requireError(t, e.call(t, "POST", suspendPath(id), c.body), c.status, c.code)
	}
	requireError(t, e.call(t, "POST", suspendPath("nope"), ""), http.StatusNotFound, "unknown_machine")
	requireError(t, e.call(t, "POST", "/events/bad%0Aname", ""), http.StatusBadRequest, "invalid_event")
	requireError(t, e.call(t, "POST", "/events/ci", `{"payload":`), http.StatusBadRequest, "bad_request")
	requireError(t, e.call(t, "GET", "/events/ci", ""), http.StatusMethodNotAllowed, "method_not_allowed")
	e.requireUnchanged(t, before, id)
}

func TestResumeWithoutTranscript(t *testing.T) {
	e := sqliteEnv(t)
	_, ask := e.start(t, "first")
	sum := requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(ask), `{"payload":"yes","continue_transcript":false}`))
	require.Equal(t, "result: yes", sum.Text)
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	require.Len(t, last.Messages, 3, "digest, the reply, its result")
	require.Equal(t, message.User, last.Messages[0].Role)
	require.Contains(t, last.Messages[0].Text(), "The request: first")
	m, _, err := e.runner.Load(t.Context(), sum.MachineID)
	require.NoError(t, err)
	found := false
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			found = found || (msg.Role == message.Record && p.Name == machine.FreshTurnRecord)
		}
	}
	require.True(t, found, "history records the fresh turn")
}

// basic offers only the core Runner capability.
type basic struct{ resumehttp.Runner }

func TestConditionEndpointsNeedTheirCapability(t *testing.T) {
	e := memEnv(t)
	_, ask := e.start(t, "first")
	h, err := resumehttp.New(resumehttp.Config{Runner: basic{e.runner}, Secret: secret, Clock: e.clock.Now})
	require.NoError(t, err)
	e.srv.Config.Handler = h
	requireError(t, e.call(t, "POST", "/events/ci", ""), http.StatusNotImplemented, "not_implemented")
	requireError(t, e.call(t, "POST", suspendPath("m"), ""), http.StatusNotImplemented, "not_implemented")
	// A fresh turn needs no capability of its own: it is a Resume.
	requireOK[resumehttp.Summary](t, e.call(t, "POST", resumePath(ask), `{"continue_transcript":false}`))
}
