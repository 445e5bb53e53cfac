package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
	"github.com/markov-agents/markov/webhook"
	"github.com/stretchr/testify/require"
)

// receiver records the deliveries it gets, answering with status().
type receiver struct {
	mu     sync.Mutex
	got    []received
	status int
	srv    *httptest.Server
}

type received struct {
	header http.Header
	body   string
}

func newReceiver(t *testing.T, status int) *receiver {
	rc := &receiver{status: status}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Header.Clone(), string(b)})
		st := rc.status
		rc.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func (rc *receiver) setStatus(s int) {
	rc.mu.Lock()
	rc.status = s
	rc.mu.Unlock()
}

// startSender runs a sender for cfg on e's store until the test ends.
func startSender(t *testing.T, e *env, cfg webhook.SenderConfig) *webhook.Sender {
	t.Helper()
	cfg.Store = e.store
	s, err := webhook.NewSender(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-s.Started():
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	}
	return s
}

// Deliveries are signed per Standard Webhooks: the reference library
// verifies them.
func TestSenderDelivers(t *testing.T) {
	e := newEnv(t, approvals)
	rc := newReceiver(t, http.StatusNoContent)
	startSender(t, e, webhook.SenderConfig{AllowPrivate: true,
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: rc.srv.URL, Secret: secretA}}})
	e.wait("m1", "approve-1", "")
	require.Eventually(t, func() bool { return len(rc.all()) == 1 }, 10*time.Second, 5*time.Millisecond)
	_, err := e.runner.AcceptResume(context.Background(), machine.ResumeInput{SuspendID: "approve-1", Payload: "ok"})
	require.NoError(t, err)
	// Resolved, the machine finishes its run: every event type is sent.
	require.Eventually(t, func() bool { return len(rc.all()) == 3 }, 10*time.Second, 5*time.Millisecond)

	var types []webhook.EventType
	for _, d := range rc.all() {
		var ev webhook.Event
		require.NoError(t, json.Unmarshal([]byte(d.body), &ev))
		types = append(types, ev.Type)
		if ev.Type != webhook.MachineFinished {
			require.Equal(t, "approve-1", ev.Data.SuspendID)
		}
		require.Equal(t, "m1", ev.Data.MachineID)
		res := sw(t, map[string]any{"op": "verify", "secret": secretA, "body": d.body, "headers": map[string]string{
			"webhook-id": d.header.Get(webhook.HeaderID), "webhook-timestamp": d.header.Get(webhook.HeaderTimestamp),
			"webhook-signature": d.header.Get(webhook.HeaderSignature)}})
		require.Equal(t, true, res["ok"], res)
		bad := sw(t, map[string]any{"op": "verify", "secret": secretB, "body": d.body, "headers": map[string]string{
			"webhook-id": d.header.Get(webhook.HeaderID), "webhook-timestamp": d.header.Get(webhook.HeaderTimestamp),
			"webhook-signature": d.header.Get(webhook.HeaderSignature)}})
		require.Equal(t, false, bad["ok"], bad)
	}
	require.Equal(t, webhook.SuspensionCreated, types[0])
	require.ElementsMatch(t, []webhook.EventType{webhook.SuspensionResolved, webhook.MachineFinished}, types[1:])
}

// A failing receiver gets the same delivery ID on every attempt, until
// the delivery is dead; a manual redelivery over HTTP sends it again.
func TestSenderRetriesThenDeadLetters(t *testing.T) {
	e := newEnv(t, approvals)
	rc := newReceiver(t, http.StatusServiceUnavailable)
	s := startSender(t, e, webhook.SenderConfig{AllowPrivate: true, MaxAttempts: 3, Backoff: time.Millisecond,
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: rc.srv.URL, Secret: secretA, Events: []webhook.EventType{webhook.SuspensionCreated}}}})
	e.wait("m1", "approve-1", "")
	require.Eventually(t, func() bool { return len(deliveries(t, s, webhook.Dead, 0)) == 1 }, 10*time.Second, 5*time.Millisecond)
	d := deliveries(t, s, "", 0)[0]
	require.Equal(t, 3, d.Attempts)
	require.Equal(t, http.StatusServiceUnavailable, d.LastStatus)
	got := rc.all()
	require.Len(t, got, 3)
	for _, r := range got {
		require.Equal(t, d.ID, r.header.Get(webhook.HeaderID))
	}

	rc.setStatus(http.StatusOK)
	api := httptest.NewServer(s.Handler())
	defer api.Close()
	resp, err := http.Post(api.URL+"/deliveries/"+d.ID+"/redeliver", "application/json", nil)
	require.NoError(t, err)
	var after webhook.Delivery
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&after))
	resp.Body.Close()
	require.Equal(t, webhook.Delivered, after.State)
	require.Equal(t, 4, after.Attempts)
	require.Equal(t, d.ID, rc.all()[3].header.Get(webhook.HeaderID))

	resp, err = http.Get(api.URL + "/deliveries?state=dead")
	require.NoError(t, err)
	var list webhook.DeliveryList
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	resp.Body.Close()
	require.Empty(t, list.Deliveries)
}

// Loopback and private targets are refused unless allowed: the delivery
// is dead at once and the receiver sees nothing.
func TestSenderRefusesPrivateTargets(t *testing.T) {
	e := newEnv(t, approvals)
	rc := newReceiver(t, http.StatusOK)
	s := startSender(t, e, webhook.SenderConfig{Backoff: time.Millisecond,
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: rc.srv.URL, Secret: secretA}}})
	e.wait("m1", "approve-1", "")
	require.Eventually(t, func() bool { return len(deliveries(t, s, webhook.Dead, 0)) == 1 }, 10*time.Second, 5*time.Millisecond)
	d := deliveries(t, s, "", 0)[0]
	require.Equal(t, 1, d.Attempts)
	require.Contains(t, d.LastError, "unsafe target")
	require.Empty(t, rc.all())
}

// Two senders on one store (two processes of a fleet) send each event
// once.
func TestTwoSendersSendOnce(t *testing.T) {
	e := newEnv(t, approvals)
	rc := newReceiver(t, http.StatusOK)
	cfg := webhook.SenderConfig{AllowPrivate: true, Subscriptions: []webhook.Subscription{{ID: "ops", URL: rc.srv.URL, Secret: secretA}}}
	a, b := startSender(t, e, cfg), startSender(t, e, cfg)
	for i := range 5 {
		e.wait("m"+string(rune('0'+i)), "approve-"+string(rune('0'+i)), "")
	}
	// Both senders may list a delivery (each lists what it reads of the
	// shared claims): count IDs, not entries.
	require.Eventually(t, func() bool {
		delivered := map[string]bool{}
		for _, d := range append(deliveries(t, a, webhook.Delivered, 0), deliveries(t, b, webhook.Delivered, 0)...) {
			delivered[d.ID] = true
		}
		return len(delivered) == 5
	}, 10*time.Second, 5*time.Millisecond)
	ids := map[string]int{}
	for _, r := range rc.all() {
		ids[r.header.Get(webhook.HeaderID)]++
	}
	require.Len(t, ids, 5)
	for id, n := range ids {
		require.Equal(t, 1, n, id)
	}
}

func TestSenderConfigRefused(t *testing.T) {
	e := newEnv(t, approvals)
	for name, sub := range map[string]webhook.Subscription{
		"url":    {ID: "a", URL: "ftp://example.com", Secret: secretA},
		"secret": {ID: "a", URL: "https://example.com", Secret: "plain"},
		"id":     {ID: "a b", URL: "https://example.com", Secret: secretA},
		"event":  {ID: "a", URL: "https://example.com", Secret: secretA, Events: []webhook.EventType{"machine.exploded"}},
	} {
		_, err := webhook.NewSender(webhook.SenderConfig{Store: e.store, Subscriptions: []webhook.Subscription{sub}})
		require.ErrorIs(t, err, webhook.ErrInvalidConfig, name)
	}
}

// On SQLite the sender's position survives a restart: what happened
// while it was stopped goes out, and nothing goes out twice.
func TestSenderResumesAfterRestart(t *testing.T) {
	st := sqlitetest.Open(t, sqlitetest.Path(t))
	e := newEnvOn(t, st, approvals)
	rc := newReceiver(t, http.StatusOK)
	cfg := webhook.SenderConfig{Store: st, AllowPrivate: true, Subscriptions: []webhook.Subscription{{ID: "ops", URL: rc.srv.URL, Secret: secretA}}}
	run := func() (*webhook.Sender, func()) {
		s, err := webhook.NewSender(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		<-s.Started()
		return s, func() { cancel(); require.NoError(t, <-done) }
	}
	s, stop := run()
	e.wait("m1", "approve-1", "")
	require.Eventually(t, func() bool { return len(deliveries(t, s, webhook.Delivered, 0)) == 1 }, 10*time.Second, 5*time.Millisecond, "%+v", deliveries(t, s, "", 0))
	stop()
	e.wait("m2", "approve-2", "")
	s, stop = run()
	defer stop()
	require.Eventually(t, func() bool { return len(deliveries(t, s, webhook.Delivered, 0)) == 1 }, 10*time.Second, 5*time.Millisecond, "%+v %d", deliveries(t, s, "", 0), len(rc.all()))
	var suspended []string
	for _, r := range rc.all() {
		var ev webhook.Event
		require.NoError(t, json.Unmarshal([]byte(r.body), &ev))
		suspended = append(suspended, ev.Data.SuspendID)
	}
	require.Equal(t, []string{"approve-1", "approve-2"}, suspended)
}

// deliveries is s.Deliveries, which must not fail.
func deliveries(t *testing.T, s *webhook.Sender, state webhook.DeliveryState, limit int) []webhook.Delivery {
	t.Helper()
	ds, err := s.Deliveries(context.Background(), state, limit)
	require.NoError(t, err)
	return ds
}
