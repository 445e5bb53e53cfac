package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// hangingModel never answers: its calls wait for their context, which a
// process killed meanwhile never sees end.
type hangingModel struct{}

func (hangingModel) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// childAccept accepts the resume of MARKOV_SUSPEND_ID, says "accepted"
// once the input is saved and waits, its run hanging in the model call
// after the resume, for the SIGKILL that the test sends.
func childAccept() int {
	return withRunner(func() (*machine.Charter, error) { return buildCharter(hangingModel{}) }, func(r *durable.Runner) int {
		if _, err := r.AcceptResume(context.Background(), machine.ResumeInput{SuspendID: os.Getenv("MARKOV_SUSPEND_ID"), Payload: "approved"}); err != nil {
			fmt.Fprintln(os.Stderr, "accept:", err)
			return 1
		}
		fmt.Println("accepted")
		select {}
	})
}

// A process accepts a resume (the 202 of an HTTP server) and dies, its
// run cut short in the model call after the resume: the input is saved,
// and the next process's Recover continues that machine's run to its
// end. The machines with nothing to continue — one awaiting a resume, one
// never run, one whose run ended — are left as they were.
func TestRecoverContinuesARunCutShort(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "recover.db")
	r := newRunner(t, openSQLite(t, db), agentModel(0))
	cut := suspended(t, r, "cut")
	suspended(t, r, "waiting")
	_, err := r.Create(ctx, "fresh", "desk", nil)
	require.NoError(t, err)
	_, err = runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: suspended(t, r, "done"), Payload: "approved"}))
	require.NoError(t, err)

	child := childCmd("accept", db, "MARKOV_SUSPEND_ID="+cut)
	require.NoError(t, testkit.StartChild(child, "accepted"))
	require.NoError(t, child.Process.Kill())
	require.Error(t, child.Wait())

	before := map[string]durable.Status{}
	for _, id := range []string{"cut", "waiting", "fresh", "done"} {
		before[id], err = r.Status(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, durable.StateIdle, before["cut"].State, "the resume was saved, its run cut short")

	after := newRunner(t, openSQLite(t, db), agentModel(0))
	n, err := after.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	m, _, err := after.Load(ctx, "cut")
	require.NoError(t, err)
	_, finished := checkHistory(t, m.History())
	require.True(t, finished, "the run went on to the final answer")
	st, err := after.Status(ctx, "cut")
	require.NoError(t, err)
	require.Equal(t, durable.StateDone, st.State)
	for _, id := range []string{"waiting", "fresh", "done"} {
		st, err := after.Status(ctx, id)
		require.NoError(t, err)
		require.Equal(t, before[id], st, "machine %s left as it was", id)
	}

	n, err = after.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to continue")
}

// Recover reports the runs that fail, and goes on with the others.
func TestRecoverReportsFailedRuns(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	r := newRunner(t, s, agentModel(0))
	for _, id := range []string{"a", "b"} {
		// An accepted resume whose run is cancelled in the model call:
		// the input is saved, the run cut short.
		sid := suspended(t, r, id)
		hang := newRunner(t, s, hangingModel{})
		_, err := hang.AcceptResume(ctx, machine.ResumeInput{SuspendID: sid, Payload: "approved"})
		require.NoError(t, err)
		stopped, stop := context.WithCancel(ctx)
		stop()
		require.ErrorIs(t, hang.Wait(stopped), context.Canceled)
	}
	broken := newRunner(t, s, modelFunc(func(context.Context) error { return errors.New("provider down") }))
	n, err := broken.Recover(ctx)
	require.Zero(t, n)
	require.ErrorContains(t, err, "recover a:")
	require.ErrorContains(t, err, "recover b:")
	require.ErrorContains(t, err, "provider down")

	// A store without store.TailLoader: Recover reads the machines whole.
	whole := newRunner(t, listerOnly{s, s}, agentModel(0))
	n, err = whole.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = r.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// listerOnly is a store whose one optional capability is listing.
type listerOnly struct {
	store.Store
	store.MachineLister
}

// modelFunc is a model whose every call returns fn's error.
type modelFunc func(ctx context.Context) error

func (f modelFunc) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	return nil, f(ctx)
}
