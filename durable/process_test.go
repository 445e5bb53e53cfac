package durable_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

// The test binary doubles as the child process of the cross-process tests:
// with MARKOV_CHILD set, it runs one child role and exits.
func TestMain(m *testing.M) { testkit.Main(m, "MARKOV_CHILD", child) }

func child(role string) int {
	switch role {
	case "checkpoint":
		return childCheckpoint()
	case "signal":
		return childSignal()
	case "watch":
		return childWatch()
	case "accept":
		return childAccept()
	case "hooksuspend":
		return childHookSuspend()
	case "effect":
		return childEffect()
	case "effecttx":
		return childEffectTx()
	case "govern":
		return childGovern()
	case "standing":
		return childStanding()
	}
	return withRunner(func() (*machine.Charter, error) { return buildCharter(agentModel(4 * time.Millisecond)) },
		func(r *durable.Runner) int {
			switch role {
			case "resume":
				return childResume(context.Background(), r)
			case "crash":
				return childCrash(context.Background(), r)
			}
			return 2
		})
}

// withRunner sets up a child process's runner over the store it is told
// of (see openChildStore) with the charter from charter, and returns
// body's exit code.
func withRunner(charter func() (*machine.Charter, error), body func(*durable.Runner) int) int {
	return testkit.Child[closingStore, *machine.Charter, *durable.Runner]{
		Open:    openChildStore,
		Charter: charter,
		Runner: func(s closingStore, c *machine.Charter) (*durable.Runner, error) {
			return durable.New(durable.Config{Store: s, Charter: c})
		},
	}.Run(body)
}

// childResume waits for "go" on stdin, then resumes the suspension and
// reports how it went: "won"; "lost: resolved", having found the
// suspension resolved (it ran nothing); or "lost: conflict", having run
// the resume and failed to save it.
func childResume(ctx context.Context, r *durable.Runner) int {
	if err := testkit.AwaitGo(); err != nil {
		return 2
	}
	_, err := runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: os.Getenv("MARKOV_SUSPEND_ID"), Payload: "from pid " + strconv.Itoa(os.Getpid())}))
	switch {
	case err == nil:
		fmt.Println("won")
	case errors.Is(err, instance.ErrAlreadyResolved), errors.Is(err, instance.ErrUnknownSuspendID):
		fmt.Println("lost: resolved")
	case errors.Is(err, store.ErrConflict):
		fmt.Println("lost: conflict")
	default:
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// childCrash kills itself with SIGKILL after MARKOV_KILL_AFTER, while it
// drives the machine "crash" as far as it gets: start it, resume what is
// pending, or continue.
func childCrash(ctx context.Context, r *durable.Runner) int {
	after, _ := time.ParseDuration(os.Getenv("MARKOV_KILL_AFTER"))
	time.AfterFunc(after, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	m, _, err := r.Load(ctx, "crash")
	if errors.Is(err, store.ErrNotFound) {
		if _, err := r.Create(ctx, "crash", "desk", nil); err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			return 1
		}
		m, _, err = r.Load(ctx, "crash")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	switch p := m.Pending(); {
	case len(m.History()) == 0:
		_, err = drain(r.Run(ctx, "crash", machine.UserText("go")))
	case len(p) > 0:
		_, err = runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: p[0].SuspendID, Payload: "approved"}))
	default:
		_, err = drain(r.Run(ctx, "crash"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	return 0
}

// childCmd is a child process playing role on the SQLite file db.
func childCmd(role, db string, env ...string) *exec.Cmd {
	return testkit.ChildCommand(append([]string{"MARKOV_CHILD=" + role, "MARKOV_DB=" + db}, env...)...)
}

func openSQLite(t *testing.T, path string) *sqlite.Store {
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTwoProcessesResumeOnce races two processes resuming one suspension
// on one SQLite file: the machine lock (an open file description lock)
// queues the second behind the first, which finds it resolved having run
// nothing — no second model call — rather than running the resume too and
// losing at the save.
func TestTwoProcessesResumeOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "race.db")
	r := newRunner(t, openSQLite(t, db), agentModel(0))
	id := suspended(t, r, "race")

	results, err := testkit.RaceChildren(
		childCmd("resume", db, "MARKOV_SUSPEND_ID="+id),
		childCmd("resume", db, "MARKOV_SUSPEND_ID="+id))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"won", "lost: resolved"}, results)

	m, _, err := r.Load(context.Background(), "race")
	require.NoError(t, err)
	_, finished := checkHistory(t, m.History())
	require.True(t, finished)
	require.Len(t, testkit.SuspendParts(m.History(), id), 1)
}

func TestCrashRecovery(t *testing.T) {
	db := filepath.Join(t.TempDir(), "crash.db")
	r := newRunner(t, openSQLite(t, db), agentModel(0))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	kills, completions := 0, 0
	lastLen := 0
	for i := 0; kills < 100; i++ {
		require.Less(t, i, 400, "too few kills landed")
		delay := time.Duration(rng.IntN(30_000)) * time.Microsecond
		err := childCmd("crash", db, "MARKOV_KILL_AFTER="+delay.String()).Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
			kills++
		default:
			t.Fatalf("child %d: %v", i, err)
		}
		// After every kill the store loads, and what it holds is a prefix
		// of the one true transcript: nothing lost, nothing doubled.
		m, _, err := r.Load(ctx, "crash")
		if errors.Is(err, store.ErrNotFound) {
			continue // killed before the create landed
		}
		require.NoError(t, err)
		h := m.History()
		if len(h) == 0 {
			continue
		}
		require.GreaterOrEqual(t, len(h), lastLen, "history never shrinks")
		lastLen = len(h)
		rounds, finished := checkHistory(t, h)
		state := m.Root().State.(desk)
		require.Equal(t, min(rounds, workRounds)+max(rounds-workRounds-1, 0), state.Done, "state matches the tools in history")
		if finished {
			completions++
			require.NoError(t, r.Delete(ctx, "crash"))
			lastLen = 0
		}
	}
	t.Logf("%d kills, %d runs completed across kills", kills, completions)
}
