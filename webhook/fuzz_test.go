package webhook_test

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/webhook"
)

// The header parsers never panic, refuse with their sentinel, and hand
// back only whole signatures.
func FuzzParseStandardSignatures(f *testing.F) {
	for _, s := range []string{"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "v1,a v1,b", "v1a,xyz v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "", ",", "v1,", "v2,AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sigs, err := webhook.ParseStandardSignatures(h)
		checkParsed(t, sigs, err)
	})
}

func FuzzParseStripeSignature(f *testing.F) {
	for _, s := range []string{"t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39", "t=1,t=2", "v1=00", "t=,v1=", "t=99999999999999999999,v1=aa"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		ts, sigs, err := webhook.ParseStripeSignature(h)
		checkParsed(t, sigs, err)
		if err == nil && ts < 0 {
			t.Fatalf("negative timestamp %d", ts)
		}
	})
}

func FuzzParseGitHubSignature(f *testing.F) {
	for _, s := range []string{"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "sha1=00", "sha256=", "sha256=zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sig, err := webhook.ParseGitHubSignature(h)
		var sigs [][]byte
		if err == nil {
			sigs = [][]byte{sig}
		}
		checkParsed(t, sigs, err)
	})
}

func checkParsed(t *testing.T, sigs [][]byte, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, webhook.ErrMalformedHeader) {
			t.Fatalf("error %v does not wrap ErrMalformedHeader", err)
		}
		return
	}
	if len(sigs) == 0 || len(sigs) > 16 {
		t.Fatalf("%d signatures", len(sigs))
	}
	for _, s := range sigs {
		if len(s) != sha256.Size {
			t.Fatalf("a signature of %d bytes", len(s))
		}
	}
}

func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "abc", "whsec_!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := webhook.ParseSecret(s)
		if err != nil && !errors.Is(err, webhook.ErrBadSecret) || err == nil && len(key) == 0 {
			t.Fatalf("ParseSecret(%q) = %v, %v", s, key, err)
		}
	})
}

// The deliveries endpoint answers any path and query with JSON: 200,
// 400 for a bad state or limit, 404 for an unknown delivery or endpoint,
// 405 for a wrong method; never a 5xx.
func FuzzDeliveriesHandler(f *testing.F) {
	for _, s := range []string{"/deliveries", "/deliveries?state=dead&limit=3", "/deliveries?state=lost", "/deliveries?limit=-1",
		"/deliveries/msg_1_ops", "/deliveries/msg_1_ops/redeliver", "/deliveries/%00", "/x"} {
		f.Add("GET", s)
		f.Add("POST", s)
	}
	s, err := webhook.NewSender(webhook.SenderConfig{Store: memstore.New(),
		Subscriptions: []webhook.Subscription{{ID: "ops", URL: "https://example.com/hook", Secret: secretA}}})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, method, target string) {
		if method != "GET" && method != "POST" {
			method = "GET"
		}
		req, err := http.NewRequest(method, "http://markov.test"+target, nil)
		if err != nil || req.URL.Path == "" || req.URL.Path[0] != '/' {
			return // not a request a server would read
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusMovedPermanently, http.StatusTemporaryRedirect:
		default:
			t.Fatalf("%s %s: %d %s", method, target, w.Code, w.Body)
		}
		if w.Code < 300 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("%s %s: %d with %q", method, target, w.Code, w.Header().Get("Content-Type"))
		}
	})
}
