package durable_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// childSignal is a process that signals ci.passed once told to: it opens
// the store it is told of, waits to be released (testkit.AwaitGo),
// signals with its pid as the payload and prints "woken N".
func childSignal() int {
	return withRunner(func() (*machine.Charter, error) { return buildCondCharter((&condModel{}).model(), time.Now) }, func(r *durable.Runner) int {
		if err := testkit.AwaitGo(); err != nil {
			return 2
		}
		woken, err := r.Signal(context.Background(), "ci.passed", "pid "+strconv.Itoa(os.Getpid()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "signal:", err)
			return 1
		}
		fmt.Println("woken", woken)
		return 0
	})
}

// Two processes signal the same event at once over one PostgreSQL
// database: every waiting suspension is woken exactly once, by one of
// them, and the counts they report add up.
func TestSignalFromTwoProcesses(t *testing.T) {
	s, _, schema := pgtest.Open(t)
	e := newCondEnv(t, s)
	const machines = 12
	for i := range machines {
		e.start(t, "m"+strconv.Itoa(i), "call ci")
	}
	cmd := func() *exec.Cmd { return testkit.ChildCommand("MARKOV_CHILD=signal", "MARKOV_PG_SCHEMA="+schema) }
	lines, err := testkit.RaceChildren(cmd(), cmd())
	require.NoError(t, err)
	total := 0
	for _, line := range lines {
		n, err := strconv.Atoi(strings.TrimPrefix(line, "woken "))
		require.NoError(t, err, line)
		total += n
	}
	require.Equal(t, machines, total, "each suspension woken by exactly one process")

	ctx := context.Background()
	for i := range machines {
		id := "m" + strconv.Itoa(i)
		m, _, err := e.r.Load(ctx, id)
		require.NoError(t, err)
		require.Empty(t, m.Pending(), id)
		results := 0
		for _, msg := range m.History() {
			if msg.Role == message.Tool {
				results++
			}
		}
		require.Equal(t, 1, results, "machine %s got one result", id)
		require.Contains(t, e.lastText(t, id), "done: pid ")
	}
	left, err := e.r.Pending(ctx, store.Filter{Event: "ci.passed"})
	require.NoError(t, err)
	require.Empty(t, left)
}
