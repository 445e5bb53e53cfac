package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
	"github.com/markov-agents/markov/webhook"
	"github.com/stretchr/testify/require"
)

// childEnv names the role of this test binary run as a child process.
const childEnv = "MARKOV_WEBHOOK_CHILD"

func TestMain(m *testing.M) { testkit.Main(m, childEnv, child) }

// child runs a Sender on the PostgreSQL schema and receiver the
// environment names until it is killed: a sending process.
func child(string) int {
	ctx := context.Background()
	var st store.Store
	var err error
	if path := os.Getenv("SQLITE_PATH"); path != "" {
		st, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	} else {
		st, err = postgres.Open(ctx, postgres.Config{ConnString: os.Getenv("PG_URL"), Schema: os.Getenv("PG_SCHEMA")})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := webhook.NewSender(webhook.SenderConfig{Store: st, AllowPrivate: true, Timeout: time.Second, Backoff: 50 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: os.Getenv("RECEIVER"), Secret: secretA}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Started():
		fmt.Println("ready")
	case err := <-done:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A sending process SIGKILLed in the middle of a delivery loses nothing:
// the next one (started after more events happened) sends the
// interrupted delivery again, with the same webhook-id, and the events of
// the downtime; the receiver, verifying each with the standardwebhooks
// library, dedups by ID and sees every event once. On PostgreSQL the
// deliveries are River jobs; the interrupted one is handed back once its
// sender is known dead.
func TestRiverDeliveriesSurviveSIGKILL(t *testing.T) {
	st, url, schema := pgtest.Open(t)
	got := killMidDelivery(t, st, "PG_URL="+url, "PG_SCHEMA="+schema)
	// A Sender that does not run reads the deliveries from River.
	view, err := webhook.NewSender(webhook.SenderConfig{Store: st, AllowPrivate: true,
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: "http://127.0.0.1:1", Secret: secretA}}})
	require.NoError(t, err)
	ds := deliveries(t, view, "", 0)
	require.Len(t, ds, 3)
	for _, d := range ds {
		require.Equal(t, webhook.Delivered, d.State, d.ID)
		want := 1
		if d.ID == got[0].header.Get(webhook.HeaderID) {
			want = 2 // the job counts the interrupted attempt
		}
		require.Equal(t, want, d.Attempts, d.ID)
	}
}

// On SQLite the serve loop's sender keeps each delivery's state with its
// claim: the next sender takes the interrupted delivery over.
func TestSQLiteDeliveriesSurviveSIGKILL(t *testing.T) {
	path := sqlitetest.Path(t)
	killMidDelivery(t, sqlitetest.Open(t, path), "SQLITE_PATH="+path)
}

// killMidDelivery runs a sending child process on st (named to it by
// env), SIGKILLs it while the receiver holds its first delivery, makes
// two more events, runs another sender, and returns what the receiver
// got once every event arrived, after checking it: each delivery
// verified by the standardwebhooks library, every event under one ID,
// only the interrupted one twice.
func killMidDelivery(t *testing.T, st store.Store, env ...string) []received {
	e := newEnvOn(t, st, approvals)
	var (
		mu       sync.Mutex
		got      []received
		inFlight = make(chan struct{}, 1)
		killed   = make(chan struct{})
		all      = make(chan struct{})
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Header.Clone(), string(b)})
		n := len(got)
		mu.Unlock()
		if n == 1 { // held until its sender is dead
			inFlight <- struct{}{}
			<-killed
		}
		if n == 4 {
			close(all)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	start := func() *exec.Cmd {
		cmd := testkit.ChildCommand(append(env, childEnv+"=send", "RECEIVER="+rcv.URL)...)
		require.NoError(t, testkit.StartChild(cmd, "ready"))
		return cmd
	}

	first := start()
	e.wait("m1", "approve-1", "")
	<-inFlight
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	close(killed)
	e.wait("m2", "approve-2", "")
	e.wait("m3", "approve-3", "")

	second := start()
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the receiver got %d deliveries of 4", len(got))
	}

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]string{} // webhook-id → suspend ID
	for _, r := range got {
		id := r.header.Get(webhook.HeaderID)
		res := sw(t, map[string]any{"op": "verify", "secret": secretA, "body": r.body, "headers": map[string]string{
			"webhook-id": id, "webhook-timestamp": r.header.Get(webhook.HeaderTimestamp),
			"webhook-signature": r.header.Get(webhook.HeaderSignature)}})
		require.Equal(t, true, res["ok"], res)
		var ev webhook.Event
		require.NoError(t, json.Unmarshal([]byte(r.body), &ev))
		if prev, ok := seen[id]; ok {
			require.Equal(t, prev, ev.Data.SuspendID, "a redelivery carries the same event")
			require.Equal(t, got[0].header.Get(webhook.HeaderID), id, "only the interrupted delivery comes twice")
		}
		seen[id] = ev.Data.SuspendID
	}
	var suspended []string
	for _, sid := range seen {
		suspended = append(suspended, sid)
	}
	require.ElementsMatch(t, []string{"approve-1", "approve-2", "approve-3"}, suspended)
	return append([]received(nil), got...)
}

// On PostgreSQL a failing delivery is retried by River with the same ID,
// then dead (River's discarded state) after MaxAttempts, listed with its
// last error over HTTP; a manual redelivery sends it again.
func TestRiverDeadLetterAndRedeliver(t *testing.T) {
	st, _, _ := pgtest.Open(t)
	e := newEnvOn(t, st, approvals)
	rc := newReceiver(t, http.StatusServiceUnavailable)
	s := startSender(t, e, webhook.SenderConfig{AllowPrivate: true, MaxAttempts: 3, Backoff: 10 * time.Millisecond,
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: rc.srv.URL, Secret: secretA, Events: []webhook.EventType{webhook.SuspensionCreated}}}})
	e.wait("m1", "approve-1", "")
	require.Eventually(t, func() bool { return len(deliveries(t, s, webhook.Dead, 0)) == 1 }, 30*time.Second, 20*time.Millisecond)
	api := httptest.NewServer(s.Handler())
	defer api.Close()
	var list webhook.DeliveryList
	getJSON(t, api.URL+"/deliveries?state=dead", &list)
	require.Len(t, list.Deliveries, 1)
	d := list.Deliveries[0]
	require.Equal(t, 3, d.Attempts)
	require.Equal(t, http.StatusServiceUnavailable, d.LastStatus)
	require.Contains(t, d.LastError, "answered 503")
	got := rc.all()
	require.Len(t, got, 3)
	for _, r := range got {
		require.Equal(t, d.ID, r.header.Get(webhook.HeaderID))
	}

	rc.setStatus(http.StatusOK)
	resp, err := http.Post(api.URL+"/deliveries/"+d.ID+"/redeliver", "application/json", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()
	require.Eventually(t, func() bool { return len(deliveries(t, s, webhook.Delivered, 0)) == 1 }, 30*time.Second, 20*time.Millisecond)
	after, err := s.Delivery(context.Background(), d.ID)
	require.NoError(t, err)
	require.Equal(t, 4, after.Attempts)
	require.Equal(t, http.StatusOK, after.LastStatus)
	require.Len(t, rc.all(), 4)
	require.Equal(t, d.ID, rc.all()[3].header.Get(webhook.HeaderID))

	resp, err = http.Post(api.URL+"/deliveries/msg_0_nobody/redeliver", "application/json", nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.True(t, strings.Contains(string(b), "unknown_delivery"), string(b))
}

// getJSON decodes the JSON answer of GET url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}
