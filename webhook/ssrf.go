package webhook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// nonPublic are the ranges a subscription may not reach unless
// SenderConfig.AllowPrivate is set, besides what netip.Addr's own
// predicates catch (loopback, private, link-local, multicast,
// unspecified).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // this network
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64: may embed a private IPv4 address
	netip.MustParsePrefix("2001:db8::/32"), // documentation
}

// checkAddr returns an error wrapping ErrUnsafeTarget when a is not a
// public unicast address.
func checkAddr(a netip.Addr) error {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() || !a.IsGlobalUnicast() {
		return fmt.Errorf("%w: %s is not a public address", ErrUnsafeTarget, a)
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return fmt.Errorf("%w: %s is not a public address", ErrUnsafeTarget, a)
		}
	}
	return nil
}

// checkURL checks a subscription URL: absolute http or https with a
// host, no user information.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%w: the URL does not parse", ErrUnsafeTarget)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: the URL must be http or https", ErrUnsafeTarget)
	case u.Host == "" || u.User != nil:
		return fmt.Errorf("%w: the URL needs a host and no user information", ErrUnsafeTarget)
	}
	return nil
}

// newClient returns the HTTP client deliveries are sent with: timeout
// per attempt, no proxy from the environment, no redirects followed
// (a 3xx is a failed attempt), and — unless allowPrivate — a dialer
// that refuses, after name resolution and for every address tried, any
// address checkAddr refuses, so that a name resolving to an internal
// address (or changing to one) is refused too.
func newClient(timeout time.Duration, allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrUnsafeTarget, address)
			}
			return checkAddr(ap.Addr())
		}
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
