package agui_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/agui"
	"github.com/markov-agents/markov/store"
)

// TestRunStreams: a message runs the thread's machine (created for a new
// thread) and streams it: RUN_STARTED, the state, one step with the
// model's text as a message, RUN_FINISHED with success.
func TestRunStreams(t *testing.T) {
	f := newFixture(t)
	_, srv := f.serve(t, agui.Config{})
	evs := post(t, srv.URL, input("t1", "r1", "hello there"))
	require.Equal(t, []string{"RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED", "TEXT_MESSAGE_START"}, types(evs)[:4])
	require.Equal(t, []string{"TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"}, types(evs)[len(evs)-3:])
	require.Equal(t, "You said: hello there", text(evs))
	require.Equal(t, "t1", evs[0].Data["threadId"])
	require.Equal(t, "r1", evs[0].Data["runId"])
	require.Equal(t, map[string]any{"type": "success"}, last(t, evs).Data["outcome"])

	snap := evs[1].Data["snapshot"].(map[string]any)
	m, _, err := f.runner.Load(t.Context(), "t1")
	require.NoError(t, err)
	require.Equal(t, map[string]any{m.Root().ID: map[string]any{"node": "desk", "state": map[string]any{"refunds": 0.0}}}, snap["instances"])
}

// TestInterruptResume: a run that suspends ends with an interrupt per
// pending suspension; a payload the schema refuses is RUN_ERROR
// invalid_payload and changes nothing; a good one resumes the call, and
// the run reports the result, the state delta and the answer; answering
// again is interrupt_resolved, an unknown ID unknown_interrupt.
func TestInterruptResume(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t)
	_, srv := f.serve(t, agui.Config{})
	evs := post(t, srv.URL, input("t1", "r1", "refund 42"))
	require.Equal(t, []string{"lookup-42", "approve-42"}, fieldOf(only(evs, "TOOL_CALL_START"), "toolCallId"))
	require.Equal(t, `{"order":42}`, only(evs, "TOOL_CALL_ARGS")[1].Data["delta"])
	results := only(evs, "TOOL_CALL_RESULT")
	require.Len(t, results, 1, "the suspended call has no result yet")
	require.Equal(t, "order 42: shoes, 40 EUR", results[0].Data["content"])

	fin := last(t, evs)
	require.Equal(t, "RUN_FINISHED", fin.Type())
	outcome := fin.Data["outcome"].(map[string]any)
	require.Equal(t, "interrupt", outcome["type"])
	ints := outcome["interrupts"].([]any)
	require.Len(t, ints, 1)
	in := ints[0].(map[string]any)
	pending, err := f.runner.Pending(ctx, store.Filter{})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	id := pending[0].ID
	require.Equal(t, id, in["id"])
	require.Equal(t, "tool_call", in["reason"])
	require.Equal(t, "refund of order 42 needs a manager", in["message"])
	require.Equal(t, "approve-42", in["toolCallId"])
	schema := in["responseSchema"].(map[string]any)
	require.ElementsMatch(t, []any{"approved", "by"}, schema["required"])

	bad := post(t, srv.URL, input("t1", "r2", "", map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"approved": "yes", "by": "ann"}}))
	require.Equal(t, []string{"RUN_ERROR"}, types(bad))
	require.Equal(t, "invalid_payload", bad[0].Data["code"])
	require.Contains(t, bad[0].Data["message"], "approved")
	still, err := f.runner.Pending(ctx, store.Filter{})
	require.NoError(t, err)
	require.Equal(t, pending, still, "a refused payload changes nothing")

	good := post(t, srv.URL, input("t1", "r3", "", map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"approved": true, "by": "ann"}}))
	require.Equal(t, "RUN_STARTED", good[0].Type())
	res := only(good, "TOOL_CALL_RESULT")
	require.Len(t, res, 1)
	require.Equal(t, "approve-42", res[0].Data["toolCallId"])
	require.Equal(t, "order 42 refunded, approved by ann", res[0].Data["content"])
	deltas := only(good, "STATE_DELTA")
	require.Len(t, deltas, 1)
	op := deltas[0].Data["delta"].([]any)[0].(map[string]any)
	require.Equal(t, "add", op["op"])
	require.Equal(t, map[string]any{"node": "desk", "state": map[string]any{"refunds": 1.0}}, op["value"])
	require.Equal(t, "Done: order 42: shoes, 40 EUR; order 42 refunded, approved by ann", text(good))
	require.Equal(t, map[string]any{"type": "success"}, last(t, good).Data["outcome"])

	again := post(t, srv.URL, input("t1", "r4", "", map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"approved": true, "by": "bob"}}))
	require.Equal(t, "interrupt_resolved", again[0].Data["code"])
	unknown := post(t, srv.URL, input("t1", "r5", "", map[string]any{"interruptId": "nope", "status": "resolved"}))
	require.Equal(t, "unknown_interrupt", unknown[0].Data["code"])
	other := post(t, srv.URL, input("t2", "r6", "", map[string]any{"interruptId": id, "status": "resolved"}))
	require.Equal(t, "unknown_interrupt", other[0].Data["code"], "an interrupt of another thread is unknown here")
	_, _, err = f.runner.Load(ctx, "t2")
	require.ErrorIs(t, err, store.ErrNotFound, "a refused input creates no machine")
}

// TestCancelInterrupt: a resume entry with status cancelled cancels the
// suspension (the call fails with the reason, the run goes on); a later
// answer to it is interrupt_cancelled.
func TestCancelInterrupt(t *testing.T) {
	f := newFixture(t)
	_, srv := f.serve(t, agui.Config{Identity: func(*http.Request) string { return "ann" }})
	evs := post(t, srv.URL, input("t1", "r1", "refund 7"))
	id := last(t, evs).Data["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)["id"].(string)
	done := post(t, srv.URL, input("t1", "r2", "", map[string]any{"interruptId": id, "status": "cancelled"}))
	require.Equal(t, "RUN_FINISHED", last(t, done).Type())
	require.Contains(t, text(done), "cancelled by ann")
	again := post(t, srv.URL, input("t1", "r3", "", map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"approved": true, "by": "ann"}}))
	require.Equal(t, "interrupt_cancelled", again[0].Data["code"])
}

// TestInvalidInput: inputs the endpoint cannot run are one RUN_ERROR
// invalid_input naming the field.
func TestInvalidInput(t *testing.T) {
	f := newFixture(t)
	_, srv := f.serve(t, agui.Config{})
	for name, tc := range map[string]struct{ body, field string }{
		"not JSON":      {`{"threadId":`, "unexpected end"},
		"no thread":     {`{"runId":"r","messages":[]}`, "threadId"},
		"no run":        {`{"threadId":"t","messages":[]}`, "runId"},
		"resume status": {`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"x","status":"maybe"}]}`, "resume[0].status"},
		"resume id":     {`{"threadId":"t","runId":"r","messages":[],"resume":[{"status":"resolved"}]}`, "resume[0].interruptId"},
		"no text":       {`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"image","source":{"type":"url","value":"https://x"}}]}]}`, "no text part"},
	} {
		t.Run(name, func(t *testing.T) {
			evs := post(t, srv.URL, []byte(tc.body))
			require.Equal(t, []string{"RUN_ERROR"}, types(evs))
			require.Equal(t, "invalid_input", evs[0].Data["code"])
			require.Contains(t, evs[0].Data["message"], tc.field)
		})
	}
}

// TestMessageOnce: a user message sent again (the same message ID: a
// retry) is not added twice.
func TestMessageOnce(t *testing.T) {
	f := newFixture(t)
	_, srv := f.serve(t, agui.Config{})
	post(t, srv.URL, input("t1", "r1", "hello"))
	evs := post(t, srv.URL, input("t1", "r1", "hello"))
	require.Equal(t, "RUN_FINISHED", last(t, evs).Type())
	require.Empty(t, text(evs))
	m, _, err := f.runner.Load(t.Context(), "t1")
	require.NoError(t, err)
	require.Len(t, m.History(), 2, "one question, one answer")
}

// TestReconnect: a client that goes away mid-run leaves the run going;
// one that reconnects with the last event ID it had gets the rest of the
// run, from the durable log, up to RUN_FINISHED. A second input for the
// thread meanwhile is run_in_progress.
func TestReconnect(t *testing.T) {
	f := newFixture(t)
	_, srv := f.serve(t, agui.Config{})
	// A bound, not a synchronisation: the first text comes live while the
	// model is held, or the test fails.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(string(input("t1", "r1", "slow"))))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var lastID string
	var seen []event
	for e := range read(t, bufio.NewReader(resp.Body)) {
		seen = append(seen, e)
		if e.ID != "" {
			lastID = e.ID
		}
		if e.Type() == "TEXT_MESSAGE_CONTENT" {
			break
		}
	}
	<-f.model.held
	cancel()
	resp.Body.Close()
	require.NotEmpty(t, lastID, "RUN_STARTED carries the log position")

	busy := post(t, srv.URL, input("t1", "r2", "more"))
	require.Equal(t, "run_in_progress", busy[0].Data["code"])

	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"?threadId=t1&runId=r1", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", lastID)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	close(f.model.release)
	var rest []event
	for e := range read(t, bufio.NewReader(resp.Body)) {
		rest = append(rest, e)
	}
	require.Equal(t, "RUN_STARTED", rest[0].Type())
	require.Equal(t, "r1", rest[0].Data["runId"])
	require.Equal(t, "RUN_FINISHED", last(t, rest).Type())
	require.Equal(t, slowText, text(rest), "the log has the reply whole")
}

// fieldOf lists field name of the events.
func fieldOf(evs []event, name string) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Data[name].(string))
	}
	return out
}

// TestCORSAndAuth: a preflight is answered without authentication, with
// CORS headers for an allowed origin only; every other request goes
// through Config.Auth, which may refuse it before anything runs.
func TestCORSAndAuth(t *testing.T) {
	f := newFixture(t)
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Test-Key") != "open sesame" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	_, srv := f.serve(t, agui.Config{Auth: auth, AllowOrigins: []string{"https://app.example"}})
	preflight := func(origin string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	ok := preflight("https://app.example")
	require.Equal(t, http.StatusNoContent, ok.StatusCode)
	require.Equal(t, "https://app.example", ok.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "POST, GET, OPTIONS", ok.Header.Get("Access-Control-Allow-Methods"))
	other := preflight("https://evil.example")
	require.Equal(t, http.StatusNoContent, other.StatusCode)
	require.Empty(t, other.Header.Get("Access-Control-Allow-Origin"))

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(string(input("t1", "r1", "hello"))))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	_, _, err = f.runner.Load(t.Context(), "t1")
	require.ErrorIs(t, err, store.ErrNotFound, "a refused request runs nothing")
}
