package durable

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
)

// TestHeldSizeTracksMemory checks the history cache's measure against
// the heap that decoded histories take, for messages of short, 300-byte
// and 2,000-byte texts: within a third either way. The encoded size
// alone, the measure before, was a sixth of it for short messages.
func TestHeldSizeTracksMemory(t *testing.T) {
	for _, textLen := range []int{0, 300, 2000} {
		h := testkit.History(5000)
		if textLen > 0 {
			for i := range h {
				h[i].Parts = []message.Part{message.Text(strings.Repeat("x", textLen))}
			}
		}
		entries := make([][]byte, len(h))
		for i, m := range h {
			var err error
			entries[i], err = serialize.MarshalMessage(m)
			require.NoError(t, err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		decoded := make([]message.Message, len(entries))
		for i, e := range entries {
			var err error
			decoded[i], err = serialize.UnmarshalMessage(e)
			require.NoError(t, err)
		}
		held := message.NewHistory(decoded)
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
		ratio := heap / float64(heldSize(entries))
		t.Logf("texts of %d bytes: heap %.0f, heldSize %d, ratio %.2f", textLen, heap, heldSize(entries), ratio)
		require.InDelta(t, 1, ratio, 0.34, "texts of %d bytes", textLen)
		runtime.KeepAlive(held)
		runtime.KeepAlive(h)
		runtime.KeepAlive(entries)
	}
}
