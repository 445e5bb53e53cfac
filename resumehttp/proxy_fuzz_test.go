package resumehttp

import (
	"github.com/markov-agents/markov/internal/faillimit"
	"net/http"
	"net/netip"
	"testing"
)

// FuzzTrustedProxies feeds the proxy headers anything: the key never
// panics and is always an IP address; a peer outside the trusted
// prefixes is keyed by its own address whatever the headers say.
func FuzzTrustedProxies(f *testing.F) {
	for _, s := range [][3]string{
		{"10.0.0.1:1", "198.51.100.1", ""},
		{"10.0.0.1:1", "1.2.3.4, 10.0.0.2", ""},
		{"10.0.0.1:1", "", `for=192.0.2.60;proto=http, for="[2001:db8::1]:80"`},
		{"[fd00::1]:1", "", `For="_hidden", for=unknown`},
		{"203.0.113.9:1", "198.51.100.1", "for=198.51.100.2"},
		{"10.0.0.1:1", `"[::1]", ,,`, ""},
		{"[::ffff:10.0.0.1]:1", "::ffff:1.2.3.4", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	key := TrustedProxies(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"))
	f.Fuzz(func(t *testing.T, peer, xff, fwd string) {
		h := http.Header{}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		if fwd != "" {
			h.Set("Forwarded", fwd)
		}
		r := &http.Request{RemoteAddr: peer, Header: h}
		got := key(r)
		p, err := netip.ParseAddrPort(peer)
		if err != nil {
			if got != faillimit.RemoteIP(r) {
				t.Fatalf("peer %q does not parse: key %q, want %q", peer, got, faillimit.RemoteIP(r))
			}
			return
		}
		if _, err := netip.ParseAddr(got); err != nil {
			t.Fatalf("key %q (peer %q, X-Forwarded-For %q, Forwarded %q) is no address", got, peer, xff, fwd)
		}
		if a := p.Addr().Unmap(); !netip.MustParsePrefix("10.0.0.0/8").Contains(a) && !netip.MustParsePrefix("fd00::/8").Contains(a) && got != a.String() {
			t.Fatalf("untrusted peer %q keyed %q", peer, got)
		}
	})
}
