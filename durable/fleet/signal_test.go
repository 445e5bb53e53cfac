package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// TestSignal: of concurrent signals of one event, each waiting suspension
// is accepted once, and the fleet's job wakes it.
func TestSignal(t *testing.T) {
	f, _ := startFleet(t)
	ctx := context.Background()
	var handles []string
	for _, id := range []string{"a", "b", "c"} {
		parkOne(t, f, id)
		sus, err := f.Runner().Suspend(ctx, id, "wait for CI", durable.WithConditions(instance.WithEvent("ci.passed")))
		require.NoError(t, err)
		require.True(t, sus.Applied)
		handles = append(handles, sus.ID)
	}
	accepted := testkit.Race(8, func(int) int {
		n, err := f.Signal(ctx, "ci.passed", "green")
		if err != nil {
			t.Error(err)
		}
		return n
	})
	total := 0
	for _, n := range accepted {
		total += n
	}
	require.Equal(t, len(handles), total, "each waiting suspension accepted once")
	for _, h := range handles {
		require.Eventually(t, func() bool {
			sus, err := f.Runner().Suspension(ctx, h)
			require.NoError(t, err)
			return sus.Status == store.StatusResolved
		}, 30*time.Second, 20*time.Millisecond, "the fleet wakes %s", h)
	}
	_, err := f.Signal(ctx, "bad\nevent", nil)
	require.ErrorIs(t, err, instance.ErrInvalidEvent)
}

// TestAwaitSentMessage: Await follows the run a sent user message starts,
// to its end (it waited for its context before, recognising resumes,
// cancellations and commands only).
func TestAwaitSentMessage(t *testing.T) {
	f, _ := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := f.Runner().Create(ctx, "m", "desk", nil)
	require.NoError(t, err)
	a, err := f.Send(ctx, "m", machine.UserText("resume"))
	require.NoError(t, err)
	steps, err := f.Await(ctx, a)
	require.NoError(t, err)
	require.NotEmpty(t, steps)
	last := steps[len(steps)-1]
	require.True(t, last.Done)
	require.True(t, last.NeedsResume(), "the run went on to its suspension")
}
