package durable_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
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
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// childSignal is a process that signals ci.passed once told to: it opens
// the PostgreSQL schema MARKOV_PG_SCHEMA of MARKOV_PG_URL, says "ready",
// waits for a line on stdin, signals with its pid as the payload and
// prints "woken N".
func childSignal() int {
	return testkit.Child[*postgres.Store, *machine.Charter, *durable.Runner]{
		Open: func() (*postgres.Store, error) {
			return postgres.Open(context.Background(), postgres.Config{ConnString: os.Getenv("MARKOV_PG_URL"), Schema: os.Getenv("MARKOV_PG_SCHEMA")})
		},
		Charter: func() (*machine.Charter, error) { return buildCondCharter((&condModel{}).model(), time.Now) },
		Runner: func(s *postgres.Store, c *machine.Charter) (*durable.Runner, error) {
			return durable.New(durable.Config{Store: s, Charter: c})
		},
	}.Run(func(r *durable.Runner) int {
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
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
	s, url, schema := pgtest.Open(t)
	e := newCondEnv(t, s)
	const machines = 12
	for i := range machines {
		e.start(t, "m"+strconv.Itoa(i), "call ci")
	}
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	procs := make([]proc, 2)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MARKOV_CHILD=signal", "MARKOV_PG_URL="+url, "MARKOV_PG_SCHEMA="+schema)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		procs[i] = proc{cmd, stdin, bufio.NewReader(stdout)}
		line, err := procs[i].out.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready\n", line)
	}
	for _, p := range procs {
		_, err := io.WriteString(p.stdin, "go\n")
		require.NoError(t, err)
	}
	total := 0
	for _, p := range procs {
		line, err := p.out.ReadString('\n')
		require.NoError(t, err)
		n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "woken "))
		require.NoError(t, err, line)
		total += n
		require.NoError(t, p.cmd.Wait())
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
