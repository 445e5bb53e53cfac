package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/webhook"
	"github.com/stretchr/testify/require"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24tdGVzdHM="
)

// approvals resumes the suspension named in the body with its decision.
var approvals = webhook.Route{Path: "/approvals", Scheme: webhook.StandardWebhooks, Secrets: []string{secretA},
	Action: webhook.Resume, SuspendID: webhook.Source{Pointer: "/suspend_id"}, Payload: "/decision"}

// The specification's own example: its secret, ID, timestamp and body
// give its signature.
func TestSignSpecificationVector(t *testing.T) {
	key, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func TestResumeAndRedelivery(t *testing.T) {
	e := newEnv(t, approvals)
	e.wait("m1", "approve-1", "")
	body := []byte(`{"suspend_id":"approve-1","decision":"approved"}`)
	first := e.post("/approvals", body, standard(t, secretA, "msg_1", e.now, body))
	require.Equal(t, http.StatusAccepted, first.status, first.raw)
	require.Equal(t, map[string]any{"delivery_id": "msg_1", "action": "resume", "machine_id": "m1", "suspend_id": "approve-1"}, first.body)
	require.Equal(t, `answer: approved`, e.said("m1"))

	// The sender retries later: new timestamp, new signature, same ID.
	e.now = e.now.Add(time.Minute)
	again := e.post("/approvals", body, standard(t, secretA, "msg_1", e.now, body))
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, first.body, again.body)
	require.Equal(t, store.StatusResolved, e.status("approve-1"))
}

// Of concurrent deliveries of one ID, one applies; the others get the
// first outcome, or 409 with Retry-After while it is being served —
// never 401, never a second resume.
func TestConcurrentRedeliveries(t *testing.T) {
	e := newEnv(t, approvals)
	e.wait("m1", "approve-1", "")
	body := []byte(`{"suspend_id":"approve-1","decision":"yes"}`)
	h := standard(t, secretA, "msg_c", e.now, body)
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() { statuses[i] = e.post("/approvals", body, h).status })
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	require.Equal(t, 1, count[http.StatusAccepted], count)
	require.Equal(t, len(statuses)-1, count[http.StatusOK]+count[http.StatusConflict], count)
	require.Equal(t, "answer: yes", e.said("m1"))
}

// A refused delivery changes nothing and is judged afresh when it comes
// again: here the suspension exists by the second delivery.
func TestRefusedDeliveryIsForgotten(t *testing.T) {
	e := newEnv(t, approvals)
	body := []byte(`{"suspend_id":"later","decision":"ok"}`)
	a := e.post("/approvals", body, standard(t, secretA, "msg_2", e.now, body))
	require.Equal(t, http.StatusNotFound, a.status)
	require.Equal(t, "unknown_suspension", a.body["code"])
	e.wait("m2", "later", "")
	a = e.post("/approvals", body, standard(t, secretA, "msg_2", e.now, body))
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "answer: ok", e.said("m2"))
}

func TestRefusals(t *testing.T) {
	e := newEnv(t, approvals)
	e.wait("m1", "approve-1", "")
	body := []byte(`{"suspend_id":"approve-1","decision":"approved"}`)
	bad := standard(t, secretA, "msg_3", e.now, body)
	bad[webhook.HeaderSignature] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	for _, c := range []struct {
		name    string
		path    string
		body    []byte
		headers map[string]string
		status  int
		code    string
	}{
		{"bad signature", "/approvals", body, bad, http.StatusUnauthorized, "bad_signature"},
		{"tampered body", "/approvals", []byte(`{"suspend_id":"approve-1","decision":"denied"}`), standard(t, secretA, "msg_3", e.now, body), http.StatusUnauthorized, "bad_signature"},
		{"other secret", "/approvals", body, standard(t, secretB, "msg_3", e.now, body), http.StatusUnauthorized, "bad_signature"},
		{"too old", "/approvals", body, standard(t, secretA, "msg_3", e.now.Add(-6*time.Minute), body), http.StatusUnauthorized, "stale_timestamp"},
		{"too new", "/approvals", body, standard(t, secretA, "msg_3", e.now.Add(6*time.Minute), body), http.StatusUnauthorized, "stale_timestamp"},
		{"no headers", "/approvals", body, nil, http.StatusUnauthorized, "missing_header"},
		{"unknown route", "/nowhere", body, standard(t, secretA, "msg_3", e.now, body), http.StatusNotFound, "unknown_route"},
		{"pointer to nothing", "/approvals", []byte(`{"id":"approve-1"}`), standard(t, secretA, "msg_4", e.now, []byte(`{"id":"approve-1"}`)), http.StatusBadRequest, "bad_pointer"},
	} {
		a := e.post(c.path, c.body, c.headers)
		require.Equal(t, c.status, a.status, "%s: %s", c.name, a.raw)
		require.Equal(t, c.code, a.body["code"], c.name)
		require.Equal(t, store.StatusPending, e.status("approve-1"), c.name)
	}
	// Refused: the delivery IDs were not spent.
	a := e.post("/approvals", body, standard(t, secretA, "msg_3", e.now, body))
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
}

// While a secret is rotated, a delivery signed with the old or the new
// one is accepted; a sender that signs with both sends two signatures.
func TestSecretRotation(t *testing.T) {
	rt := approvals
	rt.Secrets = []string{secretB, secretA}
	e := newEnv(t, rt)
	for i, secret := range []string{secretA, secretB} {
		id := fmt.Sprintf("approve-%d", i)
		e.wait("m"+strconv.Itoa(i), id, "")
		body := []byte(`{"suspend_id":"` + id + `","decision":"fine"}`)
		h := standard(t, secret, "msg_r"+strconv.Itoa(i), e.now, body)
		other := standard(t, "whsec_"+"b3RoZXItc2VjcmV0LW5vdC1jb25maWd1cmVk", "msg_r"+strconv.Itoa(i), e.now, body)
		h[webhook.HeaderSignature] = other[webhook.HeaderSignature] + " " + h[webhook.HeaderSignature]
		a := e.post("/approvals", body, h)
		require.Equal(t, http.StatusAccepted, a.status, a.raw)
	}
}

func TestCancelFromPathTemplate(t *testing.T) {
	e := newEnv(t, webhook.Route{Path: "/cancel/{id}", Scheme: webhook.StandardWebhooks, Secrets: []string{secretA},
		Action: webhook.Cancel, SuspendID: webhook.Source{Path: "id"}, Payload: "/why"})
	e.wait("m1", "approve-1", "")
	body := []byte(`{"why":"withdrawn"}`)
	a := e.post("/cancel/approve-1", body, standard(t, secretA, "msg_5", e.now, body))
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "answer: cancelled: withdrawn", e.said("m1"))
	require.Equal(t, store.StatusCancelled, e.status("approve-1"))
}

// githubSign is X-Hub-Signature-256 for body under secret.
func githubSign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// GitHub's documented example: secret "It's a Secret to Everybody",
// payload "Hello, World!" (docs: Validating webhook deliveries).
func TestGitHubDocumentedExample(t *testing.T) {
	const documented = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	require.Equal(t, documented, githubSign("It's a Secret to Everybody", []byte("Hello, World!")))
	e := newEnv(t, webhook.Route{Path: "/gh", Scheme: webhook.GitHub, Secrets: []string{"It's a Secret to Everybody"},
		Action: webhook.Signal, Event: webhook.Source{Header: "X-GitHub-Event", Prefix: "github."}})
	// The documented body is not JSON: verified, then refused for its
	// payload, and nothing changes.
	a := e.post("/gh", []byte("Hello, World!"), map[string]string{webhook.HeaderGitHubSignature: documented,
		webhook.HeaderGitHubDelivery: "d-1", "X-GitHub-Event": "push"})
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	require.Equal(t, "bad_pointer", a.body["code"])
	a = e.post("/gh", []byte("Hello, World?"), map[string]string{webhook.HeaderGitHubSignature: documented,
		webhook.HeaderGitHubDelivery: "d-1", "X-GitHub-Event": "push"})
	require.Equal(t, http.StatusUnauthorized, a.status, a.raw)

	// A push event wakes the machines waiting for github.push.
	e.wait("m1", "ci-1", "github.push")
	body := []byte(`{"ref":"refs/heads/main"}`)
	h := map[string]string{webhook.HeaderGitHubSignature: githubSign("It's a Secret to Everybody", body),
		webhook.HeaderGitHubDelivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event": "push"}
	a = e.post("/gh", body, h)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, float64(1), a.body["woken"])
	require.Equal(t, `answer: {"ref":"refs/heads/main"}`, e.said("m1"))
	again := e.post("/gh", body, h)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, a.body, again.body)
}

// stripeSign is a Stripe-Signature header for body at t under secret,
// as Stripe computes it: hex HMAC-SHA256 of "t.body", the secret used as
// written.
func stripeSign(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "%d.", t)
	m.Write(body)
	return "t=" + strconv.FormatInt(t, 10) + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// Stripe's documented header example parses: t, a v1 signature, and a
// v0 one that is skipped.
func TestStripeDocumentedHeader(t *testing.T) {
	ts, sigs, err := webhook.ParseStripeSignature("t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39")
	require.NoError(t, err)
	require.Equal(t, int64(1492774577), ts)
	require.Len(t, sigs, 1)
	require.Equal(t, "5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd", hex.EncodeToString(sigs[0]))
}

func TestStripeDelivery(t *testing.T) {
	const secret = "whsec_test_secret"
	e := newEnv(t, webhook.Route{Path: "/stripe", Scheme: webhook.Stripe, Secrets: []string{secret},
		Action: webhook.Resume, SuspendID: webhook.Source{Pointer: "/data/object/metadata/suspend_id"}, Payload: "/type"})
	e.wait("m1", "pay-1", "")
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"metadata":{"suspend_id":"pay-1"}}}}`)
	a := e.post("/stripe", body, map[string]string{webhook.HeaderStripeSignature: stripeSign(secret, e.now.Add(-10*time.Minute).Unix(), body)})
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.Equal(t, "stale_timestamp", a.body["code"])
	a = e.post("/stripe", body, map[string]string{webhook.HeaderStripeSignature: stripeSign(secret, e.now.Unix(), body)})
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "evt_1", a.body["delivery_id"])
	require.Equal(t, "answer: payment_intent.succeeded", e.said("m1"))
	// Stripe retries with a new t: the event ID makes it a redelivery.
	e.now = e.now.Add(time.Hour)
	again := e.post("/stripe", body, map[string]string{webhook.HeaderStripeSignature: stripeSign(secret, e.now.Unix(), body)})
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, a.body, again.body)
}

// Deliveries the Standard Webhooks reference library signs are accepted.
func TestReferenceLibrarySigns(t *testing.T) {
	e := newEnv(t, approvals)
	e.now = time.Now().Truncate(time.Second)
	e.wait("m1", "approve-1", "")
	body := `{"suspend_id":"approve-1","decision":"signed by the library"}`
	res := sw(t, map[string]any{"op": "sign", "secret": secretA, "id": "msg_lib", "timestamp": e.now.Unix(), "body": body})
	a := e.post("/approvals", []byte(body), map[string]string{webhook.HeaderID: "msg_lib",
		webhook.HeaderTimestamp: strconv.FormatInt(e.now.Unix(), 10), webhook.HeaderSignature: res["signature"].(string)})
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "answer: signed by the library", e.said("m1"))
}

func TestConfigRefused(t *testing.T) {
	r, _ := newRunner(t)
	for _, c := range []struct {
		name  string
		route webhook.Route
		want  string
	}{
		{"scheme", webhook.Route{Path: "/a", Scheme: "x", Secrets: []string{secretA}, Action: webhook.Resume, SuspendID: webhook.Source{Pointer: "/id"}}, "scheme"},
		{"secret", webhook.Route{Path: "/a", Scheme: webhook.StandardWebhooks, Secrets: []string{"not base64!"}, Action: webhook.Resume, SuspendID: webhook.Source{Pointer: "/id"}}, "whsec_"},
		{"no source", webhook.Route{Path: "/a", Scheme: webhook.GitHub, Secrets: []string{"s"}, Action: webhook.Resume}, "suspend_id"},
		{"two sources", webhook.Route{Path: "/a", Scheme: webhook.GitHub, Secrets: []string{"s"}, Action: webhook.Resume, SuspendID: webhook.Source{Pointer: "/id", Header: "X"}}, "exactly one"},
		{"wildcard", webhook.Route{Path: "/a", Scheme: webhook.GitHub, Secrets: []string{"s"}, Action: webhook.Resume, SuspendID: webhook.Source{Path: "id"}}, "not in the path"},
		{"pointer", webhook.Route{Path: "/a", Scheme: webhook.GitHub, Secrets: []string{"s"}, Action: webhook.Resume, SuspendID: webhook.Source{Pointer: "id"}}, "start with /"},
		{"action", webhook.Route{Path: "/a", Scheme: webhook.GitHub, Secrets: []string{"s"}, Action: "delete"}, "action"},
	} {
		_, err := webhook.New(webhook.Config{Routes: []webhook.Route{c.route}, Acceptor: r, Signaler: r})
		require.ErrorIs(t, err, webhook.ErrInvalidConfig, c.name)
		require.ErrorContains(t, err, c.want, c.name)
	}
}

// Two handlers sharing a store (two processes): a redelivery to the
// other one gets the first outcome, from the store's replay guard.
func TestRedeliveryAcrossHandlers(t *testing.T) {
	e := newEnv(t, approvals)
	e.wait("m1", "approve-1", "")
	other, err := webhook.New(webhook.Config{Routes: []webhook.Route{approvals}, Acceptor: e.runner, Signaler: e.runner,
		Clock: func() time.Time { return e.now }})
	require.NoError(t, err)
	body := []byte(`{"suspend_id":"approve-1","decision":"approved"}`)
	first := e.post("/approvals", body, standard(t, secretA, "msg_x", e.now, body))
	require.Equal(t, http.StatusAccepted, first.status, first.raw)
	e.srv.Config.Handler = other
	again := e.post("/approvals", body, standard(t, secretA, "msg_x", e.now, body))
	require.Equal(t, http.StatusOK, again.status, again.raw)
	require.Equal(t, first.body, again.body)
}
