package a2a_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/a2a"
)

// A notification that is not one, or that no call waits for, is refused
// with a clear status and signals nothing.
func TestPushHandlerRefuses(t *testing.T) {
	signalled := 0
	h := a2a.PushHandler(signalerFunc(func(context.Context, string, any) (int, error) {
		signalled++
		return 0, nil // no call waits
	}), nil)
	task := `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`
	for _, c := range []struct {
		name, method, token, body string
		want                      int
		says                      string
	}{
		{"get", http.MethodGet, "tok", task, http.StatusMethodNotAllowed, "method GET"},
		{"no token", http.MethodPost, "", task, http.StatusUnauthorized, "no A2A-Notification-Token"},
		{"long token", http.MethodPost, strings.Repeat("t", 600), task, http.StatusUnauthorized, "no A2A-Notification-Token"},
		{"not json", http.MethodPost, "tok", "hello", http.StatusBadRequest, "invalid push notification"},
		{"no event", http.MethodPost, "tok", `{}`, http.StatusBadRequest, "unknown event type"},
		{"no task", http.MethodPost, "tok", `{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"hi"}]}}`, http.StatusBadRequest, "names no task"},
		{"too big", http.MethodPost, "tok", `{"task":{"id":"` + strings.Repeat("x", 2<<20) + `"}}`, http.StatusRequestEntityTooLarge, "body over"},
		{"unknown task", http.MethodPost, "tok", task, http.StatusNotFound, `no call waits for this task: task "t1"`},
	} {
		req := httptest.NewRequest(c.method, "/push", strings.NewReader(c.body))
		if c.token != "" {
			req.Header.Set("A2A-Notification-Token", c.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, c.want, rec.Code, c.name)
		require.Contains(t, rec.Body.String(), c.says, c.name)
	}
	require.Equal(t, 1, signalled, "only the well-formed notification was looked up")
}

// The JavaScript SDK's header works too, and a woken call answers 204.
func TestPushHandlerWakes(t *testing.T) {
	var got []any
	h := a2a.PushHandler(signalerFunc(func(_ context.Context, event string, payload any) (int, error) {
		require.True(t, strings.HasPrefix(event, "a2a.push."))
		got = append(got, payload)
		return 1, nil
	}), nil)
	req := httptest.NewRequest(http.MethodPost, "/push", strings.NewReader(`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`))
	req.Header.Set("X-A2A-Notification-Token", "tok")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Len(t, got, 1)
}
