package a2a

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// publicAddr returns nil when ip may be connected to without
// Config.AllowPrivate: not loopback, private, link-local, multicast,
// unspecified or otherwise not routable on the Internet.
func publicAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(), ip.IsUnspecified(), ip.IsLoopback(), ip.IsPrivate(),
		ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast(),
		ip.IsMulticast(), cgnat.Contains(ip):
		return fmt.Errorf("%w: %s is not a public address", ErrForbiddenAddress, ip)
	}
	return nil
}

// cgnat is the shared address space of carrier-grade NAT (RFC 6598).
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// guardedClient returns an HTTP client whose connections go to public
// addresses only, checked after name resolution (so a name that resolves
// to a private address is refused too), and that follows no redirect to
// elsewhere unchecked: every connection goes through the same dialer.
func guardedClient(timeout time.Duration) *http.Client {
	d := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrForbiddenAddress, address, err)
			}
			return publicAddr(ap.Addr())
		},
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = d.DialContext
	t.Proxy = nil // a proxy would connect on our behalf, unchecked
	return &http.Client{Transport: t, Timeout: timeout}
}

// checkURL checks the URL named field: absolute, http or https, and —
// unless private addresses are allowed — not naming a private host
// literally (an address, "localhost").
func checkURL(field, raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %s %q is not an absolute http(s) URL", ErrInvalidConfig, field, raw)
	}
	if allowPrivate {
		return nil
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Errorf("%w: %s %q names this machine", ErrForbiddenAddress, field, raw)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := publicAddr(ip); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}
