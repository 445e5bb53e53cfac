package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// TestHooksUnderDurable: on every store, OnSuspend's metadata is on the
// saved suspension, a machine loaded again after the save (another
// process, a recovery) does not meet its suspension's hook again, and
// OnResolved hears the cause and the decider once.
func TestHooksUnderDurable(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		var mu sync.Mutex
		var suspends int
		var resolved []instance.Event
		hooks := machine.Hooks{
			OnSuspend: func(_ context.Context, _ string, c *instance.SuspendedCall) error {
				mu.Lock()
				defer mu.Unlock()
				suspends++
				c.Metadata = []byte(`{"ticket":"OPS-7"}`)
				return nil
			},
			OnResolved: func(_ context.Context, e instance.Event) {
				mu.Lock()
				defer mu.Unlock()
				resolved = append(resolved, e)
			},
		}
		runner := func() *durable.Runner {
			c, err := buildCharter(agentModel(0), func(cfg *machine.CharterConfig) { cfg.Hooks = hooks })
			require.NoError(t, err)
			r, err := durable.New(durable.Config{Store: s, Charter: c})
			require.NoError(t, err)
			return r
		}
		ctx := context.Background()
		id := suspended(t, runner(), "m1")
		saved, err := runner().Call(ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, `{"ticket":"OPS-7"}`, string(saved.Metadata))

		// Another process loads it and runs it with no input, as a
		// recovery does: the suspension is saved, its hook does not run.
		second := runner()
		_, err = drain(second.Run(ctx, "m1"))
		require.NoError(t, err)
		require.Equal(t, 1, suspends)

		_, err = runSteps(second.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved", By: "ann"}))
		require.NoError(t, err)
		require.Len(t, resolved, 1)
		e := resolved[0]
		require.Equal(t, []any{instance.EventResumed, instance.CauseExplicit, "ann", id}, []any{e.Type, e.Cause, e.By, e.SuspendID})
		require.Equal(t, 1, suspends)
	})
}

// logHooks returns hooks whose OnSuspend appends a line to the file at
// path (a count that outlives the process).
func logHooks(path string) machine.Hooks {
	return machine.Hooks{OnSuspend: func(_ context.Context, _ string, c *instance.SuspendedCall) error {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintln(f, c.Name)
		return err
	}}
}

// childHookSuspend runs machine m1 until it suspends, under hooks that log
// to MARKOV_HOOK_LOG, says "suspended" once that is saved and waits for
// the SIGKILL the test sends.
func childHookSuspend() int {
	charter := func() (*machine.Charter, error) {
		return buildCharter(agentModel(0), func(cfg *machine.CharterConfig) { cfg.Hooks = logHooks(os.Getenv("MARKOV_HOOK_LOG")) })
	}
	return withRunner(charter, func(r *durable.Runner) int {
		ctx := context.Background()
		if _, err := r.Create(ctx, "m1", "desk", nil); err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			return 1
		}
		if _, err := drain(r.Run(ctx, "m1", machine.UserText("go"))); err != nil {
			fmt.Fprintln(os.Stderr, "run:", err)
			return 1
		}
		fmt.Println("suspended")
		select {}
	})
}

// TestOnSuspendNotAgainAfterACrash: a process whose suspension was saved
// is SIGKILLed; the next process recovers and runs the machine, and the
// suspension's OnSuspend hook does not run again.
func TestOnSuspendNotAgainAfterACrash(t *testing.T) {
	dir := t.TempDir()
	db, hookLog := filepath.Join(dir, "hooks.db"), filepath.Join(dir, "hooks.log")
	child := childCmd("hooksuspend", db, "MARKOV_HOOK_LOG="+hookLog)
	require.NoError(t, testkit.StartChild(child, "suspended"))
	require.NoError(t, child.Process.Kill())
	require.Error(t, child.Wait())

	c, err := buildCharter(agentModel(0), func(cfg *machine.CharterConfig) { cfg.Hooks = logHooks(hookLog) })
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: openSQLite(t, db), Charter: c})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = r.Recover(ctx)
	require.NoError(t, err)
	_, err = drain(r.Run(ctx, "m1"))
	require.NoError(t, err)
	st, err := r.Status(ctx, "m1")
	require.NoError(t, err)
	require.Len(t, st.Pending, 1, "still waiting")
	logged, err := os.ReadFile(hookLog)
	require.NoError(t, err)
	require.Equal(t, "ask\n", string(logged), "OnSuspend ran once, in the process that saved the suspension")
}
