package durable_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// TestRunEventsSavesEachStepBeforeYieldingIt runs the agent to its
// approval through RunEvents and checks that every step is in the store
// when its event arrives, that each model reply is saved (a checkpoint,
// which no event shows) before its tools start, and that the tool and
// suspension events come as the run goes.
func TestRunEventsSavesEachStepBeforeYieldingIt(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		st := s
		r := newRunner(t, st, agentModel(0))
		other := newRunner(t, st, agentModel(0))
		_, err := r.Create(ctx, "m1", "desk", nil)
		require.NoError(t, err)
		kinds := map[machine.EventKind]int{}
		lastRev := int64(0)
		var last *machine.Step
		for e, err := range r.RunEvents(ctx, "m1", machine.UserText("go")) {
			require.NoError(t, err)
			kinds[e.Kind]++
			if e.Kind != machine.EventStep && e.Kind != machine.EventToolStarted {
				continue
			}
			// Read the store from another runner: the step, or the
			// reply whose tool starts, is saved.
			_, rev, err := other.Load(ctx, "m1")
			require.NoError(t, err)
			require.Greater(t, rev, lastRev, "a step or a tool call without a save")
			lastRev = rev
			if e.Kind == machine.EventStep {
				require.NotEqual(t, machine.Replied, e.Step.Reason, "a checkpoint is no event")
				last = e.Step
			}
		}
		require.NotNil(t, last)
		require.True(t, last.NeedsResume())
		require.Equal(t, workRounds+1, kinds[machine.EventToolStarted])
		require.Equal(t, 1, kinds[machine.EventSuspended])

		// The resume goes on from the store, and the sequence is
		// single-use.
		seq := r.RunEvents(ctx, "m1", machine.ResumeInput{SuspendID: last.Suspensions[0].SuspendID, Payload: "ok"})
		var done bool
		for e, err := range seq {
			require.NoError(t, err)
			done = done || (e.Kind == machine.EventStep && e.Step.Done)
		}
		require.True(t, done)
		for _, err := range seq {
			require.ErrorIs(t, err, machine.ErrIterReused)
		}
		m, _, err := r.Load(ctx, "m1")
		require.NoError(t, err)
		_, finished := checkHistory(t, m.History())
		require.True(t, finished)
	})
}
