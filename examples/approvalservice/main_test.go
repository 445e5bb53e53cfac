package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/resumehttp"
)

func TestDemo(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), nil, "", &out))
	require.Equal(t, "refund waiting for a manager\n"+
		"approved by dana over HTTP; the run is done: true\n"+
		"assistant: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.\n", out.String())
}

var secret = []byte("0123456789abcdef0123456789abcdef-test")

// service starts the service on a test server and a refund waiting on it.
func service(t *testing.T) (*Service, *httptest.Server, string) {
	t.Helper()
	ctx := context.Background()
	svc, err := Open(ctx, filepath.Join(t.TempDir(), "refunds.db"), secret)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, svc.Close()) })
	srv := httptest.NewServer(svc.Handler)
	t.Cleanup(srv.Close)
	id, err := svc.Start(ctx)
	require.NoError(t, err)
	return svc, srv, id
}

// TestTheClientsRefusals: what the service refuses reaches the client as a
// *RefusedError with its status and code, and changes nothing; the good
// decision then goes through, once.
func TestTheClientsRefusals(t *testing.T) {
	ctx := context.Background()
	svc, srv, id := service(t)
	c := Client{BaseURL: srv.URL, Secret: secret}
	refusal := func(err error) *RefusedError {
		t.Helper()
		r, ok := errors.AsType[*RefusedError](err)
		require.True(t, ok, "%v", err)
		return r
	}

	_, err := c.Resume(ctx, id, map[string]any{"approved": "yes"})
	r := refusal(err)
	require.Equal(t, http.StatusBadRequest, r.Status)
	require.Equal(t, "payload_decode", r.Code)

	forger := Client{BaseURL: srv.URL, Secret: []byte("another secret of at least 32 bytes!!")}
	_, err = forger.Resume(ctx, id, refund.Approval{Approved: true, Manager: "mallory"})
	require.Equal(t, http.StatusUnauthorized, refusal(err).Status)

	sp, err := svc.Runner.Suspension(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "pending", string(sp.Status), "a refusal changes nothing")

	sum, err := c.Resume(ctx, id, refund.Approval{Approved: true, Manager: "dana"})
	require.NoError(t, err)
	require.True(t, sum.Done)
	require.Contains(t, sum.Text, "approved by dana")

	_, err = c.Resume(ctx, id, refund.Approval{Approved: false, Manager: "eve"})
	r = refusal(err)
	require.Equal(t, http.StatusConflict, r.Status)
	require.Equal(t, "already_resolved", r.Code)
}

// TestAWeakSecretIsRefused: the service will not start on a guessable
// secret.
func TestAWeakSecretIsRefused(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "r.db"), []byte("short"))
	require.ErrorIs(t, err, resumehttp.ErrWeakSecret)
}

// TestTheCommandLineClient: decide, as a manager's script runs it, against
// the service.
func TestTheCommandLineClient(t *testing.T) {
	_, srv, id := service(t)
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"decide", srv.URL, id, "false", "dana"}, string(secret), &out))
	require.Contains(t, out.String(), "done: true")
	err := run(context.Background(), []string{"decide", srv.URL, id, "maybe", "dana"}, string(secret), &out)
	require.ErrorContains(t, err, `decision "maybe": want true or false`)
}
