package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/webhook"
	"github.com/stretchr/testify/require"
)

// serve --webhooks: a signed delivery resumes a parked machine, its
// redelivery gets the first outcome, and the resolution goes out to a
// subscription, listed under /webhooks/deliveries.
func TestServeWebhooks(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)
	secret := []byte("0123456789abcdef-0123456789abcdef-test-secret")
	const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	events := make(chan webhook.Event, 8)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev webhook.Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		events <- ev
	}))
	defer rcv.Close()
	file := filepath.Join(t.TempDir(), "webhooks.json")
	conf, _ := json.Marshal(map[string]any{
		"routes": []any{map[string]any{"path": "/approve/{id}", "scheme": "standard-webhooks", "secrets": []string{"env:HOOK_SECRET"},
			"action": "resume", "suspend_id": map[string]string{"path": "id"}, "payload": "/data", "tolerance": "2m"}},
		"subscriptions": []any{map[string]any{"id": "ops", "url": rcv.URL, "secret": "env:HOOK_SECRET", "events": []string{"suspension.resolved"}}},
		"allow_private": true,
	})
	require.NoError(t, os.WriteFile(file, conf, 0o600))

	var out, errb syncBuffer
	addrs := make(chan net.Addr, 1)
	c := &CLI{Charter: charter, Model: "test model", Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string {
			return map[string]string{"TEST_SECRET": string(secret), "HOOK_SECRET": hookSecret}[k]
		},
		onListen: func(a net.Addr) { addrs <- a }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--secret-env", "TEST_SECRET", "--webhooks", file})
	}()
	defer func() { cancel(); require.NoError(t, <-done) }()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("serve ended early: %v\n%s", err, errb.String())
	}
	base := "http://" + addr.String()

	body := []byte(`{"data":{"approved":true,"manager":"hook"}}`)
	deliver := func() (int, map[string]any) {
		key, err := webhook.ParseSecret(hookSecret)
		require.NoError(t, err)
		now := time.Now()
		req, err := http.NewRequest(http.MethodPost, base+"/hooks/approve/"+suspendID, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set(webhook.HeaderID, "msg_cli")
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(webhook.HeaderSignature, webhook.Sign(key, "msg_cli", now, body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		return resp.StatusCode, m
	}
	status, first := deliver()
	require.Equal(t, http.StatusAccepted, status, first)
	require.Equal(t, machineID, first["machine_id"])
	status, again := deliver()
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, first, again)

	select {
	case ev := <-events:
		require.Equal(t, webhook.SuspensionResolved, ev.Type)
		require.Equal(t, suspendID, ev.Data.SuspendID)
	case <-time.After(10 * time.Second):
		t.Fatalf("no event delivered\n%s", errb.String())
	}

	// The deliveries are behind the API's signature.
	resp, err := http.Get(base + "/webhooks/deliveries")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, err := http.NewRequest(http.MethodGet, base+"/webhooks/deliveries", nil)
	require.NoError(t, err)
	resumehttp.SignRequest(secret, req, nil, time.Now())
	var list webhook.DeliveryList
	require.Eventually(t, func() bool {
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		require.NoError(t, json.Unmarshal(b, &list))
		resumehttp.SignRequest(secret, req, nil, time.Now())
		return len(list.Deliveries) == 1 && list.Deliveries[0].State == webhook.Delivered
	}, 10*time.Second, 10*time.Millisecond)
}

func TestServeWebhooksFileRefused(t *testing.T) {
	dir := t.TempDir()
	c := &CLI{Getenv: func(string) string { return "" }}
	for name, content := range map[string]string{
		"unknown field": `{"routes":[],"nonsense":1}`,
		"missing env":   `{"routes":[{"path":"/a","scheme":"github","secrets":["env:NOPE"],"action":"signal","event":{"header":"X"}}]}`,
		"tolerance":     `{"routes":[{"path":"/a","scheme":"github","secrets":["s"],"action":"signal","event":{"header":"X"},"tolerance":"soon"}]}`,
	} {
		p := filepath.Join(dir, name+".json")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		_, err := c.readWebhooks(p)
		require.Error(t, err, name)
	}
}
