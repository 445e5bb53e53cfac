package durable_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

func TestSuspendIdleMachine(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		e := newCondEnv(t, s)
		ctx := context.Background()
		e.start(t, "m", "hello")
		sus, err := e.r.Suspend(ctx, "m", "review", durable.WithConditions(
			instance.WithEvent("go.on"), instance.WithTimeout(30*time.Minute), instance.OnTimeoutSummary()))
		require.NoError(t, err)
		require.True(t, sus.Applied)
		require.NotEmpty(t, sus.ID)
		require.Equal(t, "m", sus.MachineID)
		require.Equal(t, durable.FinishStep, sus.Mode)
		require.Equal(t, e.clock.Now(), sus.SuspendedAt)
		require.Equal(t, instance.Conditions{Event: "go.on", Timeout: 30 * time.Minute,
			Deadline: e.clock.Now().Add(30 * time.Minute), OnTimeout: instance.TimeoutResumeWithSummary}, sus.Conditions)
		require.Contains(t, sus.Summary, `paused desk after 2 messages; last reply: "ok"; waiting for a resume or the event "go.on"`)

		entry, err := e.r.Suspension(ctx, sus.ID)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, entry.Status)
		require.Equal(t, string(instance.KindInstance), entry.Kind)
		require.Equal(t, "go.on", entry.Event)

		woken, err := e.r.Signal(ctx, "go.on", "carry on")
		require.NoError(t, err)
		require.Equal(t, 1, woken)
		require.Equal(t, "carry on", e.model.last().Messages[len(e.model.last().Messages)-1].Text())
	})
}

func TestSuspendRejectsBadRequests(t *testing.T) {
	e := newCondEnv(t, stores(t)["memstore"](t))
	ctx := context.Background()
	e.start(t, "m", "hello")
	_, err := e.r.Suspend(ctx, "nope", "r")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.r.Suspend(ctx, "m", "r", durable.WithMode("later"))
	require.ErrorIs(t, err, durable.ErrInvalidSuspend)
	_, err = e.r.Suspend(ctx, "m", "r", durable.WithConditions(instance.WithEvent("")))
	require.ErrorIs(t, err, durable.ErrInvalidSuspend)
	require.ErrorIs(t, err, instance.ErrInvalidEvent)
	pending, err := e.r.Pending(ctx, store.Filter{MachineID: "m"})
	require.NoError(t, err)
	require.Empty(t, pending)
}

// running starts a run of a new machine id with text whose first model
// call blocks until released; it returns once that call is in flight,
// with the channel the run's steps arrive on and the release.
func (e *condEnv) running(t *testing.T, id, text string) (<-chan []machine.Step, func()) {
	t.Helper()
	e.model.entered = make(chan struct{}, 16)
	e.model.gate = make(chan struct{}, 16)
	ctx := context.Background()
	_, err := e.r.Create(ctx, id, "desk", nil)
	require.NoError(t, err)
	out := make(chan []machine.Step, 1)
	go func() {
		steps, err := drain(e.r.Run(ctx, id, machine.UserText(text)))
		if err != nil {
			t.Error(err)
		}
		out <- steps
	}()
	<-e.model.entered
	return out, func() {
		for range 16 {
			e.model.gate <- struct{}{}
		}
	}
}

func TestSuspendModesOfARunningMachine(t *testing.T) {
	cases := []struct {
		mode durable.SuspendMode
		// work and calls are the work tool's runs and the model calls
		// before the suspension; text the last reply.
		work, calls int64
		text        string
	}{
		{durable.InterruptImmediate, 0, 1, ""},
		{durable.FinishStep, 1, 1, ""},
		{durable.WaitForCompletion, 1, 2, "done: worked"},
	}
	for name, open := range stores(t) {
		for _, c := range cases {
			t.Run(name+"/"+string(c.mode), func(t *testing.T) {
				e := newCondEnv(t, open(t))
				ctx := context.Background()
				workBefore := workRuns.Load()
				done, release := e.running(t, "m", "call work")
				sus, err := e.r.Suspend(ctx, "m", "hold on", durable.WithMode(c.mode), durable.NoWait())
				require.NoError(t, err)
				require.False(t, sus.Applied, "a run holds the machine")
				require.Equal(t, c.mode, sus.Mode)
				release()
				steps := <-done
				require.Equal(t, c.work, workRuns.Load()-workBefore)
				require.Equal(t, c.calls, e.model.calls.Load())
				require.Equal(t, c.text, e.lastText(t, "m"))
				last := steps[len(steps)-1]
				require.True(t, last.Done)
				require.Len(t, last.Suspensions, 1)
				require.Equal(t, sus.ID, last.Suspensions[0].SuspendID)
				require.Equal(t, instance.ByCaller, last.Suspensions[0].Initiator)
				var suspended []instance.Event
				for _, s := range steps {
					for _, ev := range s.Events {
						if ev.Type == instance.EventSuspended && ev.SuspendID == sus.ID {
							suspended = append(suspended, ev)
						}
					}
				}
				require.Len(t, suspended, 1, "the next step reports it")
				require.Equal(t, instance.ByCaller, suspended[0].Initiator)
				rq := e.s.(store.SuspendRequester)
				left, err := rq.SuspendRequests(ctx, "m")
				require.NoError(t, err)
				require.Empty(t, left, "an applied request is dropped")

				// The resume goes on where the suspension cut in: the reply
				// kept at the interrupt runs its tool with no second call.
				_, err = runSteps(e.r.Resume(ctx, machine.ResumeInput{SuspendID: sus.ID, Payload: nil}))
				require.NoError(t, err)
				require.Equal(t, int64(1), workRuns.Load()-workBefore)
				require.Equal(t, int64(2), e.model.calls.Load())
				require.Equal(t, "done: worked", e.lastText(t, "m"))
			})
		}
	}
}

func TestSuspendWaitsForTheRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		e := newCondEnv(t, s)
		ctx := context.Background()
		done, release := e.running(t, "m", "call work")
		got := make(chan durable.Suspension, 1)
		go func() {
			sus, err := e.r.Suspend(ctx, "m", "hold on", durable.WithMode(durable.WaitForCompletion))
			if err != nil {
				t.Error(err)
			}
			got <- sus
		}()
		release()
		<-done
		sus := <-got
		require.True(t, sus.Applied)
		require.Equal(t, e.clock.Now(), sus.SuspendedAt)
		m, _, err := e.r.Load(ctx, "m")
		require.NoError(t, err)
		require.Len(t, m.Pending(), 1)
		require.Equal(t, sus.ID, m.Pending()[0].SuspendID)
	})
}

// countingRequester counts the reads of suspend requests of a memstore,
// which reports with its loads and saves whether any are kept.
type countingRequester struct {
	*memstore.Store
	reads atomic.Int64
}

func (c *countingRequester) SuspendRequests(ctx context.Context, machineID string) ([]store.SuspendRequest, error) {
	c.reads.Add(1)
	return c.Store.SuspendRequests(ctx, machineID)
}

// A run on a store.RequestReporter reads the suspend requests at no step
// boundary while none is kept, and still applies one kept meanwhile.
func TestRequestsReadOnlyWhenKept(t *testing.T) {
	s := &countingRequester{Store: memstore.New()}
	e := newCondEnv(t, s)
	ctx := context.Background()
	done, release := e.running(t, "m", "call work")
	require.Zero(t, s.reads.Load(), "the load saw no request")
	sus, err := e.r.Suspend(ctx, "m", "hold on", durable.WithMode(durable.WaitForCompletion), durable.NoWait())
	require.NoError(t, err)
	release()
	steps := <-done
	require.True(t, steps[len(steps)-1].Done)
	require.Equal(t, sus.ID, steps[len(steps)-1].Suspensions[0].SuspendID, "the request applied at the run's end")
	require.Positive(t, s.reads.Load())

	reads := s.reads.Load()
	_, err = runSteps(e.r.Resume(ctx, machine.ResumeInput{SuspendID: sus.ID, Payload: nil}))
	require.NoError(t, err)
	require.Equal(t, reads, s.reads.Load(), "nothing kept: no boundary of the resumed run reads the requests")
}

// TestDeleteWaitsForARun checks that Delete takes the machine's hold:
// while a run is in flight it waits, here until its deadline, and leaves
// the machine in place; once the run has saved and ended it deletes. A
// holder deletes with Hold.Delete and keeps the hold.
func TestDeleteWaitsForARun(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			e := newCondEnv(t, open(t))
			ctx := context.Background()
			done, release := e.running(t, "m", "call work")
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			require.ErrorIs(t, e.r.Delete(short, "m"), context.DeadlineExceeded)
			_, _, err := e.r.Load(ctx, "m")
			require.NoError(t, err, "the machine is still there")

			deleted := make(chan error, 1)
			go func() { deleted <- e.r.Delete(ctx, "m") }()
			release()
			steps := <-done
			require.Equal(t, machine.EndTurn, steps[len(steps)-1].Reason)
			require.NoError(t, <-deleted)
			_, _, err = e.r.Load(ctx, "m")
			require.ErrorIs(t, err, store.ErrNotFound)

			_, err = e.r.Create(ctx, "h", "desk", nil)
			require.NoError(t, err)
			h, err := e.r.Hold(ctx, "h")
			require.NoError(t, err)
			require.NoError(t, h.Delete(ctx))
			_, ok, err := e.r.TryHold(ctx, "h")
			require.NoError(t, err)
			require.False(t, ok, "the hold stays taken after Hold.Delete")
			h.Release()
			_, _, err = e.r.Load(ctx, "h")
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
}

// TestCallerSuspensionLogged: a caller suspension of a machine no run
// holds is in the machine's event log, as the suspended event a run
// reports for one it applies (Watch followers see the machine parked).
func TestCallerSuspensionLogged(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		e := newCondEnv(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e.start(t, "m", "hello")
		before, err := e.r.LoadAt(ctx, "m")
		require.NoError(t, err)
		sus, err := e.r.Suspend(ctx, "m", "review")
		require.NoError(t, err)
		after, err := e.r.LoadAt(ctx, "m")
		require.NoError(t, err)
		require.Equal(t, before.EventSeq+1, after.EventSeq, "one event logged")
		for ev, err := range e.r.Watch(ctx, "m", before.EventSeq) {
			require.NoError(t, err)
			require.Equal(t, machine.EventSuspended, ev.Kind)
			require.Equal(t, sus.ID, ev.Lifecycle.SuspendID)
			require.Equal(t, instance.ByCaller, ev.Lifecycle.Initiator)
			require.Equal(t, sus.ID, ev.Call.SuspendID)
			require.Equal(t, "review", ev.Call.Reason)
			return
		}
	})
}
