package webhook

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "224.0.0.1", "64:ff9b::a00:1", "255.255.255.255"} {
		require.ErrorIs(t, checkAddr(netip.MustParseAddr(a)), ErrUnsafeTarget, a)
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "::ffff:8.8.8.8"} {
		require.NoError(t, checkAddr(netip.MustParseAddr(a)), a)
	}
}
