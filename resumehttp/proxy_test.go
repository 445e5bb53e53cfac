package resumehttp_test

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/memstore"
)

func TestTrustedProxies(t *testing.T) {
	key := resumehttp.TrustedProxies(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"))
	for _, tc := range []struct {
		name, peer string
		header     http.Header
		want       string
	}{
		{"untrusted peer: header ignored", "203.0.113.7:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "203.0.113.7"},
		{"trusted peer without header", "10.1.2.3:5000", nil, "10.1.2.3"},
		{"one proxy", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"spoofed first hop", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"1.2.3.4, 198.51.100.1"}}, "198.51.100.1"},
		{"two proxies", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1, 10.9.9.9"}}, "198.51.100.1"},
		{"two header lines", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1", "10.9.9.9"}}, "198.51.100.1"},
		{"garbage hop", "10.1.2.3:5000", http.Header{"X-Forwarded-For": {"198.51.100.1, nonsense"}}, "10.1.2.3"},
		{"Forwarded", "10.1.2.3:5000", http.Header{"Forwarded": {`for=192.0.2.60;proto=http;by=10.1.2.3`}}, "192.0.2.60"},
		{"Forwarded IPv6 with port", "[fd00::1]:443", http.Header{"Forwarded": {`for="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::17"},
		{"Forwarded first", "10.1.2.3:5000", http.Header{"Forwarded": {"for=192.0.2.60"}, "X-Forwarded-For": {"198.51.100.1"}}, "192.0.2.60"},
		{"Forwarded unknown", "10.1.2.3:5000", http.Header{"Forwarded": {"for=unknown"}}, "10.1.2.3"},
		{"IPv4-mapped peer", "[::ffff:10.1.2.3]:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.peer, Header: tc.header}
			require.Equal(t, tc.want, key(r))
		})
	}
}

// Behind a trusted proxy, the failure limit is per forwarded client: one
// that fails its burst is refused, another one of the same proxy is served.
func TestFailureLimitBehindAProxy(t *testing.T) {
	e := newEnvWith(t, memstore.New(), func(c *resumehttp.Config) {
		c.FailureBurst, c.FailureRefill = 2, time.Hour
		c.ClientKey = resumehttp.TrustedProxies(netip.MustParsePrefix("127.0.0.0/8"))
	})
	_, sid := e.start(t, "x")
	from := func(req *http.Request, client string) *http.Request {
		req.Header.Set("X-Forwarded-For", client)
		return req
	}
	bad := func() *http.Request {
		req := e.request(t, "GET", "/suspensions/"+sid, "")
		resumehttp.SignRequest([]byte("another secret, just as long as the real one"), req, nil, e.clock.Now())
		return from(req, "198.51.100.1")
	}
	for range 2 {
		requireError(t, do(t, bad()), http.StatusUnauthorized, "bad_signature")
	}
	requireError(t, do(t, bad()), http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, http.StatusOK, do(t, from(e.signed(t, "GET", "/suspensions/"+sid, ""), "198.51.100.2")).Status)
}
