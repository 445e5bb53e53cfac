package resumehttp

import (
	"github.com/markov-agents/markov/internal/faillimit"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies returns a Config.ClientKey for a handler behind reverse
// proxies: a request whose peer (r.RemoteAddr) lies in one of proxies is
// keyed by the client address the proxies forwarded — the Forwarded
// header's "for" (RFC 7239), or else X-Forwarded-For — walked from the
// nearest hop back past every hop that is itself a trusted proxy; any
// other request, and a header that does not parse, by its peer's
// address. A header set by a client that is not a trusted proxy is
// ignored, so no client chooses its own key.
func TrustedProxies(proxies ...netip.Prefix) func(*http.Request) string {
	trusted := func(a netip.Addr) bool {
		for _, p := range proxies {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		peer, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			return faillimit.RemoteIP(r)
		}
		cur := peer.Addr().Unmap()
		hops := forwardedFor(r.Header)
		for i := len(hops) - 1; i >= 0 && trusted(cur); i-- {
			a, ok := parseHop(hops[i])
			if !ok {
				break
			}
			cur = a
		}
		return cur.String()
	}
}

// forwardedFor returns the client addresses the proxies of a request
// recorded, the client's first: the "for" parameters of the Forwarded
// headers if there are any, else the X-Forwarded-For lists. Parameters
// other than for, and quoting, are kept as they are for parseHop.
func forwardedFor(h http.Header) []string {
	var hops []string
	if fwd := h.Values("Forwarded"); len(fwd) > 0 {
		for _, line := range fwd {
			for elem := range strings.SplitSeq(line, ",") {
				for pair := range strings.SplitSeq(elem, ";") {
					k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(k, "for") {
						hops = append(hops, v)
					}
				}
			}
		}
		return hops
	}
	for _, line := range h.Values("X-Forwarded-For") {
		for hop := range strings.SplitSeq(line, ",") {
			hops = append(hops, strings.TrimSpace(hop))
		}
	}
	return hops
}

// parseHop parses a forwarded address: an IP, maybe quoted, maybe with a
// port (an IPv6 address with a port in brackets). Obfuscated identifiers
// and "unknown" do not parse.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
