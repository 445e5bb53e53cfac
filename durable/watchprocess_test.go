package durable_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// openChildStore opens the store a child process is told of: the
// PostgreSQL schema MARKOV_PG_SCHEMA of MARKOV_TEST_POSTGRES when set,
// else the SQLite file MARKOV_DB.
func openChildStore() (closingStore, error) {
	if schema := os.Getenv("MARKOV_PG_SCHEMA"); schema != "" {
		return postgres.Open(context.Background(), postgres.Config{ConnString: os.Getenv(pgtest.EnvVar), Schema: schema})
	}
	return sqlite.Open(context.Background(), sqlite.Config{Path: os.Getenv("MARKOV_DB")})
}

// closingStore is a store.Store with its Close method, for testkit.Child.
type closingStore interface {
	store.Store
	io.Closer
}

// childWatch watches machine MARKOV_MACHINE after sequence number
// MARKOV_AFTER and prints each event as a JSON line. It exits after
// MARKOV_STOP_LIVE live text deltas when that is set (a watcher that goes
// away mid-stream), else after the first Done step.
func childWatch() int {
	return withRunner(func() (*machine.Charter, error) { return buildCharter(chattyModel(0)) }, func(r *durable.Runner) int {
		after, _ := strconv.ParseInt(os.Getenv("MARKOV_AFTER"), 10, 64)
		stopLive, _ := strconv.Atoi(os.Getenv("MARKOV_STOP_LIVE"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out := json.NewEncoder(os.Stdout)
		for e, err := range r.Watch(ctx, os.Getenv("MARKOV_MACHINE"), after) {
			if err != nil {
				fmt.Fprintln(os.Stderr, "watch:", err)
				return 1
			}
			if err := out.Encode(e); err != nil {
				return 1
			}
			if e.Live && e.Kind == machine.EventTextDelta {
				if stopLive--; stopLive == 0 {
					return 0
				}
			}
			if stopLive <= 0 && e.Kind == machine.EventStep && e.Step.Done {
				return 0
			}
		}
		return 1
	})
}

// watcherProc is a child process watching a machine.
type watcherProc struct {
	cmd *exec.Cmd
	out *bufio.Scanner
}

func startWatcher(t *testing.T, env []string, after int64, stopLive int) *watcherProc {
	t.Helper()
	cmd := testkit.ChildCommand(append(env, "MARKOV_CHILD=watch", "MARKOV_MACHINE=m1",
		"MARKOV_AFTER="+strconv.FormatInt(after, 10), "MARKOV_STOP_LIVE="+strconv.Itoa(stopLive))...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	return &watcherProc{cmd: cmd, out: sc}
}

// next reads the watcher's next event; ok is false when it exited.
func (w *watcherProc) next(t *testing.T) (durable.Event, bool) {
	t.Helper()
	if !w.out.Scan() {
		return durable.Event{}, false
	}
	var e durable.Event
	require.NoError(t, json.Unmarshal(w.out.Bytes(), &e))
	return e, true
}

// watchAcrossProcesses runs the cross-process watch scenario on the store
// s, which child processes open through env: a watcher in another process
// receives the log of a suspended machine, then, live, the text of the
// run a resume starts, and goes away mid-stream; a second one resumes
// from the last sequence number the first received and gets the rest,
// without a gap or a duplicate.
func watchAcrossProcesses(t *testing.T, s store.Store, env []string) {
	ctx := context.Background()
	r := newRunner(t, s, chattyModel(15*time.Millisecond))
	id := suspended(t, r, "m1")

	first := startWatcher(t, env, 0, 2)
	var seqs []int64
	var live strings.Builder
	for {
		e, ok := first.next(t)
		require.True(t, ok, "the first watcher ended before the log's first Done step")
		seqs = append(seqs, e.Seq)
		if e.Kind == machine.EventStep && e.Step.Done {
			break
		}
	}
	resumed := make(chan error, 1)
	go func() {
		_, err := runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"}))
		resumed <- err
	}()
	for {
		e, ok := first.next(t)
		if !ok {
			break
		}
		if e.Live {
			require.Zero(t, e.Seq)
			if e.Kind == machine.EventTextDelta {
				live.WriteString(e.Text)
			}
			continue
		}
		seqs = append(seqs, e.Seq)
	}
	require.NoError(t, first.cmd.Wait())
	require.NotEmpty(t, live.String(), "the first watcher received text live")
	require.True(t, strings.HasPrefix(chattyText, live.String()), "live text %q is the answer's beginning", live.String())
	require.NoError(t, <-resumed)

	second := startWatcher(t, env, seqs[len(seqs)-1], 0)
	var text strings.Builder
	for {
		e, ok := second.next(t)
		require.True(t, ok, "the second watcher ended before the last Done step")
		require.False(t, e.Live, "the run is over: everything comes from the log")
		seqs = append(seqs, e.Seq)
		if e.Kind == machine.EventTextDelta {
			text.WriteString(e.Text)
		}
		if e.Kind == machine.EventStep && e.Step.Done {
			break
		}
	}
	require.NoError(t, second.cmd.Wait())
	require.Equal(t, chattyText, text.String())
	for i, seq := range seqs {
		require.Equal(t, int64(i+1), seq, "sequence numbers across both watchers: no gap, no duplicate")
	}
	all, err := testkit.Collect(firstN(r.Watch(ctx, "m1", 0), len(seqs)))
	require.NoError(t, err)
	require.Len(t, all, len(seqs), "the log holds exactly what the watchers received")
}

// firstN yields the first n pairs of seq.
func firstN[T any](seq func(func(T, error) bool), n int) func(func(T, error) bool) {
	return func(yield func(T, error) bool) {
		if n == 0 {
			return
		}
		i := 0
		for v, err := range seq {
			if !yield(v, err) || err != nil {
				return
			}
			if i++; i == n {
				return
			}
		}
	}
}

func TestWatchFromAnotherProcessSQLite(t *testing.T) {
	db := filepath.Join(t.TempDir(), "watch.db")
	watchAcrossProcesses(t, openSQLite(t, db), []string{"MARKOV_DB=" + db})
}

func TestWatchFromAnotherProcessPostgres(t *testing.T) {
	s, _, schema := pgtest.Open(t)
	watchAcrossProcesses(t, s, []string{"MARKOV_PG_SCHEMA=" + schema})
}
