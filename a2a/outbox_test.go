package a2a

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// FuzzPushTarget feeds the push URL check anything: a URL it lets
// through is an absolute http(s) URL naming no loopback or private host
// literally; anything else is refused with ErrInvalidConfig or
// ErrForbiddenAddress; never a panic.
func FuzzPushTarget(f *testing.F) {
	for _, s := range []string{"https://hooks.example.com/a2a", "http://127.0.0.1:8080/push", "http://[::1]/", "http://localhost/",
		"http://10.0.0.1/", "http://100.64.1.1/", "ftp://x/", "//x", "", "http://%zz", "https://8.8.8.8/", "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := checkURL("push notification URL", raw, false)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrForbiddenAddress) {
				t.Fatalf("error %v is neither ErrInvalidConfig nor ErrForbiddenAddress", err)
			}
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "localhost" {
			t.Fatalf("%q let through", raw)
		}
	})
}

// An outbox entry that is not one is dropped; one for a target the
// guarded client refuses is dropped at its first attempt; a delivered
// one leaves the outbox; a failed one waits for its backoff.
func TestOutboxDeliver(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	var status = http.StatusServiceUnavailable
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer hook.Close()
	now := time.Unix(1e9, 0)
	o := &outbox{records: st, client: hook.Client(), checkTarget: func(string) error { return nil }, attempts: 3, backoff: time.Minute,
		logger: slog.New(slog.DiscardHandler), now: func() time.Time { return now }, added: make(chan struct{}, 1)}
	_, err := st.PutRecord(ctx, store.Record{Kind: outboxKind, Key: "t0/c0/garbage", Data: []byte("{not json")}, 0)
	require.NoError(t, err)
	ev := sdk.NewStatusUpdateEvent(sdk.TaskInfo{TaskID: "t1", ContextID: "c1"}, sdk.TaskStateCompleted, nil)
	require.NoError(t, o.SendPush(ctx, &sdk.PushConfig{ID: "c1", TaskID: "t1", URL: hook.URL, Token: "tok"}, ev))

	o.deliver(ctx)
	rs, err := st.ListRecords(ctx, outboxKind, "")
	require.NoError(t, err)
	require.Len(t, rs, 1, "the garbage is dropped, the failed notification kept")
	require.Contains(t, string(rs[0].Data), `"attempts":1`)
	require.Contains(t, string(rs[0].Data), "503")

	status = http.StatusNoContent
	o.deliver(ctx)
	rs, _ = st.ListRecords(ctx, outboxKind, "")
	require.Len(t, rs, 1, "not before its backoff")
	now = now.Add(time.Minute)
	o.deliver(ctx)
	rs, _ = st.ListRecords(ctx, outboxKind, "")
	require.Empty(t, rs, "delivered")

	// A guarded client refuses a loopback target: dropped at once.
	o.client = guardedClient(time.Second)
	require.NoError(t, o.SendPush(ctx, &sdk.PushConfig{ID: "c2", TaskID: "t2", URL: hook.URL}, ev))
	o.deliver(ctx)
	rs, _ = st.ListRecords(ctx, outboxKind, "")
	require.Empty(t, rs, "a forbidden address is not tried again")
}
