package durable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetryBackoff: the waits double from Backoff up to MaxBackoff, and
// the zero Retry waits the defaults.
func TestRetryBackoff(t *testing.T) {
	rt := Retry{Backoff: time.Second, MaxBackoff: 5 * time.Second}
	var got []time.Duration
	for n := range 5 {
		got = append(got, rt.wait(n))
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, got)
	require.Equal(t, DefaultRetryBackoff, Retry{}.wait(0))
	require.Equal(t, DefaultRetryMaxBackoff, Retry{}.wait(1000))
}
