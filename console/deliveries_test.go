package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/webhook"
)

// TestDeliveriesPage: a delivery its receiver refuses until it is dead
// shows as dead with its last error; the page's Redeliver button sends it
// again, with the same ID, and it shows as delivered.
func TestDeliveriesPage(t *testing.T) {
	ctx := context.Background()
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	var ids []string
	idc := make(chan string, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idc <- r.Header.Get(webhook.HeaderID)
		w.WriteHeader(int(status.Load()))
	}))
	defer rcv.Close()

	path := filepath.Join(t.TempDir(), "console.db")
	runner := openRunner(t, path)
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	sender, err := webhook.NewSender(webhook.SenderConfig{Store: st, AllowPrivate: true, MaxAttempts: 2, Backoff: time.Millisecond,
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: rcv.URL, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Events: []webhook.EventType{webhook.SuspensionCreated}}}})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sender.Run(rctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	<-sender.Started()

	s := newStack(t, console.Config{Runner: runner, Deliveries: sender})
	s.park(t, "m1", 7)
	ids = append(ids, <-idc, <-idc)
	require.Equal(t, ids[0], ids[1])
	require.Eventually(t, func() bool {
		ds, err := sender.Deliveries(ctx, webhook.Dead, 0)
		return err == nil && len(ds) == 1
	}, 10*time.Second, 5*time.Millisecond)

	c := signedIn(t, s, "ops")
	code, body := c.get("/ui/deliveries?state=dead")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<a href="/ui/deliveries">Webhooks</a>`)
	require.Regexp(t, `(?s)<tr id="delivery-`+ids[0]+`">.*suspension.created.*>dead<.*>2<.*answered 503.*action="deliveries/`+ids[0]+`/redeliver"`, body)

	status.Store(http.StatusNoContent)
	code, loc, _ := c.post("/ui/deliveries", "/ui/deliveries/"+ids[0]+"/redeliver", url.Values{})
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/ui/deliveries?redelivered="+ids[0], loc)
	require.Equal(t, ids[0], <-idc)
	_, body = c.get(loc)
	require.Contains(t, body, "is sent again")
	require.Regexp(t, `(?s)<tr id="delivery-`+ids[0]+`">.*>delivered<.*>3<`, body)

	code, _, _ = c.post("/ui/deliveries", "/ui/deliveries/msg_0_nobody/redeliver", url.Values{})
	require.Equal(t, http.StatusNotFound, code)
	code, _ = c.get("/ui/deliveries?state=lost")
	require.Equal(t, http.StatusBadRequest, code)
}

// Without a sender there is no deliveries page, and no link to it.
func TestDeliveriesPageWithoutSender(t *testing.T) {
	s := newStack(t, console.Config{})
	c := signedIn(t, s, "ops")
	code, body := c.get("/ui/deliveries")
	require.Equal(t, http.StatusNotFound, code)
	require.NotContains(t, body, `href="/ui/deliveries"`)
}
