package instance_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
)

func TestLifecycle(t *testing.T) {
	moves := []struct {
		name string
		move func(*instance.SuspendedCall) error
		want instance.Status
	}{
		{"resolve", (*instance.SuspendedCall).Resolve, instance.StatusResolved},
		{"expire", (*instance.SuspendedCall).Expire, instance.StatusExpired},
		{"cancel", (*instance.SuspendedCall).Cancel, instance.StatusCancelled},
	}
	for _, mv := range moves {
		t.Run(mv.name, func(t *testing.T) {
			c := instance.SuspendedCall{SuspendID: "s1", Status: instance.StatusPending}
			require.NoError(t, mv.move(&c))
			require.Equal(t, mv.want, c.Status)
			for _, again := range moves {
				err := again.move(&c)
				require.ErrorIs(t, err, instance.ErrAlreadyResolved)
				require.Equal(t, mv.want, c.Status, "a refused move changes nothing")
			}
		})
	}
}

// BenchmarkResolve measures one lifecycle move of a pending call.
func BenchmarkResolve(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		c := instance.SuspendedCall{SuspendID: "s1", Status: instance.StatusPending}
		if err := c.Resolve(); err != nil {
			b.Fatal(err)
		}
	}
}
