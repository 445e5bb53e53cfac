package durable_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// flaky is a model whose next down calls fail, as a model endpoint that
// is down does.
type flaky struct {
	llm.Model
	down atomic.Int32
}

func (f *flaky) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if f.down.Add(-1) >= 0 {
		return nil, errors.New("model endpoint refused the connection")
	}
	return f.Model.Generate(ctx, req)
}

// retrying is a runner on a SQLite file with retry, over a model that
// can be taken down, and machine m suspended on it.
func retrying(t *testing.T, retry durable.Retry) (*durable.Runner, *flaky, string) {
	t.Helper()
	model := &flaky{Model: agentModel(0)}
	r, err := durable.New(durable.Config{Store: openSQLite(t, filepath.Join(t.TempDir(), "retry.db")), Charter: newCharter(t, model), Retry: retry})
	require.NoError(t, err)
	return r, model, suspended(t, r, "m")
}

// waitAll waits for the runner's background runs, retries included.
func waitAll(t *testing.T, r *durable.Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.Wait(ctx))
}

// TestRetryAfterAcceptedRun: the run after an accepted resume fails (the
// model is down for two calls); with Config.Retry the runner tries it
// again with backoff and the machine finishes with no other input.
// Without Retry it stays idle, waiting for its next input (#29).
func TestRetryAfterAcceptedRun(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		retry durable.Retry
		want  durable.State
	}{
		{"retried", durable.Retry{Attempts: 5, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}, durable.StateDone},
		{"no retry", durable.Retry{}, durable.StateIdle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, model, id := retrying(t, tc.retry)
			model.down.Store(2)
			a, err := r.AcceptResume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"})
			require.NoError(t, err)
			_, err = r.Await(ctx, a)
			require.ErrorContains(t, err, "refused the connection", "the first run fails")
			waitAll(t, r)
			st, err := r.Status(ctx, "m")
			require.NoError(t, err)
			require.Equal(t, tc.want, st.State)
		})
	}
}

// TestRetryParks: a run that fails past its retries parks the machine
// (Runner.Parked, on SQLite), with the last error.
func TestRetryParks(t *testing.T) {
	ctx := context.Background()
	r, model, id := retrying(t, durable.Retry{Attempts: 2, Backoff: time.Millisecond})
	model.down.Store(100)
	_, err := r.AcceptResume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"})
	require.NoError(t, err)
	waitAll(t, r)
	parked, err := r.Parked(ctx, 10)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, "m", parked[0].MachineID)
	require.Contains(t, parked[0].Errors[0], "after 2 retries")
	require.Contains(t, parked[0].Errors[0], "refused the connection")
	require.EqualValues(t, 100-3, model.down.Load(), "the run and two retries: three model calls, nothing more")
}

// TestAcceptContinue: an operator's try again of a machine whose run
// failed after its input continues it to its end in the background; a
// machine a run holds is refused as busy, an unknown one as not found.
func TestAcceptContinue(t *testing.T) {
	ctx := context.Background()
	r, model, id := retrying(t, durable.Retry{})
	model.down.Store(1)
	a, err := r.AcceptResume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"})
	require.NoError(t, err)
	_, err = r.Await(ctx, a)
	require.Error(t, err)
	st, err := r.Status(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, durable.StateIdle, st.State, "left waiting for its next input")

	h, err := r.Hold(ctx, "m")
	require.NoError(t, err)
	_, err = r.AcceptContinue(ctx, "m")
	require.ErrorIs(t, err, durable.ErrBusy)
	h.Release()

	a, err = r.AcceptContinue(ctx, "m")
	require.NoError(t, err)
	_, err = r.Await(ctx, a)
	require.NoError(t, err)
	st, err = r.Status(ctx, "m")
	require.NoError(t, err)
	require.Equal(t, durable.StateDone, st.State)

	_, err = r.AcceptContinue(ctx, "nobody")
	require.ErrorIs(t, err, store.ErrNotFound)
}
