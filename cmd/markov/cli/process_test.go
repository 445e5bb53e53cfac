package cli

// Tests of serve and worker as OS processes on PostgreSQL: the test binary
// re-executed as the command line (childMain), stopped with SIGTERM.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// Environment of a child: childEnv makes the test binary the command line
// on echoCharter; latencyEnv is its model's latency.
const (
	childEnv   = "MARKOV_CLI_TEST_CHILD"
	latencyEnv = "MARKOV_CLI_TEST_LATENCY"
	// modelMark is what the child's model writes on stderr when a call
	// starts, before its latency.
	modelMark = "model call started: "
	// childSecret is the children's $MARKOV_SECRET.
	childSecret = "0123456789abcdef-0123456789abcdef-test"
)

// echoCharter is a charter of one "echo" node whose model answers the last
// user message with "echo: " and its text after latency, having written
// modelMark and the text to mark; to the message "wait" it calls the tool
// "wait", which suspends, and answers its result with "resumed".
func echoCharter(latency time.Duration, mark io.Writer) (*machine.Charter, error) {
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == message.Tool:
			return scripted.Text("resumed"), nil
		case last.Text() == "wait":
			return scripted.Tool("wait", struct{}{}), nil
		}
		fmt.Fprintf(mark, "%s%s\n", modelMark, last.Text())
		return scripted.Reply{Text: "echo: " + last.Text(), Latency: latency}, nil
	})
	wait := node.NewTool("wait", "Wait for a person.", func(ctx *node.ToolContext[struct{}], _ struct{}) (string, error) {
		return "", ctx.Suspend("waiting for a person")
	})
	n, err := node.New("echo", node.Config[struct{}]{Tools: []node.Tool[struct{}]{wait}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Name: "echo", Model: model, Nodes: []*node.Node{n}})
}

// childMain runs the command line os.Args[1:] on echoCharter, as the
// markov command does: SIGTERM and SIGINT cancel its context.
func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	latency, err := time.ParseDuration(os.Getenv(latencyEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	charter, err := echoCharter(latency, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	c := &CLI{Name: "markov", Charter: charter, Stdout: os.Stdout, Stderr: os.Stderr}
	return c.Main(ctx, os.Args[1:])
}

// child is a command line running in a child process.
type child struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string // its stdout and stderr, a line at a time
	out   syncBuffer  // all of it, for failure messages
	done  chan struct{}
	err   error // Wait's, once done is closed
}

// startChild starts the test binary as the command line args, its model
// answering after latency.
func startChild(t *testing.T, latency time.Duration, args ...string) *child {
	t.Helper()
	return startChildEnv(t, []string{childEnv + "=1", latencyEnv + "=" + latency.String()}, args...)
}

// startChildEnv starts the test binary as the command line args, with
// env added to the environment.
func startChildEnv(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), env...), "MARKOV_SECRET="+childSecret)
	cmd.WaitDelay = 5 * time.Second
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	w.Close()
	c := &child{t: t, cmd: cmd, lines: make(chan string, 10000), done: make(chan struct{})}
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c.out.Write([]byte(sc.Text() + "\n"))
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { c.err = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("child %v output:\n%s", args, c.out.String())
		}
	})
	return c
}

// waitFor returns the first line of the child's output from now on that
// matches re, failing after timeout or if the child exits first.
func (c *child) waitFor(re *regexp.Regexp, timeout time.Duration) []string {
	c.t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case line := <-c.lines:
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-c.done:
			c.t.Fatalf("the child exited (%v) before printing %q", c.err, re)
		case <-timer.C:
			c.t.Fatalf("the child printed no %q in %s", re, timeout)
		}
	}
}

// terminate sends SIGTERM and returns how long the child took to exit,
// failing unless it exits with status 0 within timeout.
func (c *child) terminate(timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	require.NoError(c.t, c.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.t.Fatalf("the child did not exit within %s of SIGTERM", timeout)
	}
	require.NoError(c.t, c.err, "exit status")
	return time.Since(start)
}

// echoFleet opens a schema of its own with a fleet on echoCharter that is
// not started (the test accepts inputs with it; children work them), and
// creates a machine. It returns the fleet, the machine's ID and the
// arguments that choose the database.
func echoFleet(t *testing.T) (*fleet.Fleet, string, []string) {
	t.Helper()
	st, url, schema := pgtest.Open(t)
	charter, err := echoCharter(0, io.Discard)
	require.NoError(t, err)
	f, err := fleet.New(fleet.Config{Store: st, Charter: charter})
	require.NoError(t, err)
	id, err := f.Runner().Create(context.Background(), "", "echo", nil)
	require.NoError(t, err)
	return f, id, []string{"--store", url, "--schema", schema}
}

// replies returns the assistant texts in machine id's history.
func replies(t *testing.T, f *fleet.Fleet, id string) []string {
	t.Helper()
	m, _, err := f.Runner().Load(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, msg := range m.History() {
		if msg.Role == message.Assistant {
			out = append(out, msg.Text())
		}
	}
	return out
}

var modelCalled = regexp.MustCompile("^" + modelMark + "(.*)$")

// A worker told to stop while a slow model call runs lets the run finish
// within --shutdown-timeout and exits 0; the machine is complete.
func TestWorkerFinishesItsRunOnSIGTERM(t *testing.T) {
	f, id, db := echoFleet(t)
	w := startChild(t, 2*time.Second, append([]string{"worker", "--workers", "2", "--shutdown-timeout", "60s", "--health", "127.0.0.1:0"}, db...)...)
	w.waitFor(regexp.MustCompile(`^worker for postgres://\S+ \(schema \S+\): running the fleet's machines \(inputs, deadlines\) with 2 workers$`), time.Minute)
	health := w.waitFor(regexp.MustCompile(`^health probes on http://(\S+)/healthz and /readyz$`), time.Minute)[1]
	for _, path := range []string{"/healthz", "/readyz"} {
		require.Equal(t, http.StatusOK, getStatus(t, "http://"+health+path, nil), path)
	}
	require.Equal(t, http.StatusNotFound, getStatus(t, "http://"+health+"/suspensions", nil), "no API on a worker")
	_, err := f.Send(context.Background(), id, machine.UserText("hello"))
	require.NoError(t, err)
	require.Equal(t, "hello", w.waitFor(modelCalled, time.Minute)[1])

	took := w.terminate(time.Minute)
	require.Less(t, took, 60*time.Second)
	require.Regexp(t, `(?s)shutting down\n.*stopped\n`, w.out.String())
	require.Equal(t, []string{"echo: hello"}, replies(t, f, id), "the run finished before the worker exited")
}

// A worker whose run outlasts --shutdown-timeout cancels it and exits 0;
// another worker continues the machine from its last save: the input is
// applied once, and the machine completes.
func TestWorkerHandsBackItsRunOnSIGTERM(t *testing.T) {
	f, id, db := echoFleet(t)
	slow := startChild(t, time.Hour, append([]string{"worker", "--workers", "1", "--shutdown-timeout", "300ms"}, db...)...)
	_, err := f.Send(context.Background(), id, machine.UserText("hello"))
	require.NoError(t, err)
	require.Equal(t, "hello", slow.waitFor(modelCalled, time.Minute)[1])

	took := slow.terminate(30 * time.Second)
	require.Less(t, took, 10*time.Second, "300ms of grace, then the run is cancelled")
	require.Contains(t, slow.out.String(), "shutdown timeout: the runs in progress were cancelled")
	require.Contains(t, slow.out.String(), "stopped\n")
	require.Empty(t, replies(t, f, id))

	fast := startChild(t, 0, append([]string{"worker", "--workers", "1"}, db...)...)
	require.Equal(t, "hello", fast.waitFor(modelCalled, time.Minute)[1], "the second worker continues the run")
	require.Eventually(t, func() bool { return len(replies(t, f, id)) > 0 }, time.Minute, 20*time.Millisecond)
	fast.terminate(time.Minute)
	require.Equal(t, []string{"echo: hello"}, replies(t, f, id))
	m, _, err := f.Runner().Load(context.Background(), id)
	require.NoError(t, err)
	var users int
	for _, msg := range m.History() {
		if msg.Role == message.User {
			users++
		}
	}
	require.Equal(t, 1, users, "the input is applied once")
}

// A worker SIGKILLed during a model call leaves its job running with the
// machine's lock released: another worker takes the job over
// (--take-over-after) and continues the machine within seconds, not after
// River's rescue (--rescue-after, a minute by default, and its 30 s tick).
func TestWorkerTakesOverAKilledWorkersRun(t *testing.T) {
	f, id, db := echoFleet(t)
	dying := startChild(t, time.Hour, append([]string{"worker", "--workers", "1"}, db...)...)
	_, err := f.Send(context.Background(), id, machine.UserText("hello"))
	require.NoError(t, err)
	require.Equal(t, "hello", dying.waitFor(modelCalled, time.Minute)[1])
	survivor := startChild(t, 0, append([]string{"worker", "--workers", "1", "--take-over-after", "500ms", "--rescue-after", "10m"}, db...)...)
	survivor.waitFor(regexp.MustCompile(`running the fleet's machines`), time.Minute)

	killed := time.Now()
	require.NoError(t, dying.cmd.Process.Kill())
	<-dying.done
	require.Equal(t, "hello", survivor.waitFor(modelCalled, 10*time.Second)[1], "the survivor continues the run")
	took := time.Since(killed)
	t.Logf("from SIGKILL to the model call in the survivor: %v", took)
	require.Less(t, took, 5*time.Second)
	require.Eventually(t, func() bool { return len(replies(t, f, id)) > 0 }, time.Minute, 20*time.Millisecond)
	survivor.terminate(time.Minute)
	require.Equal(t, []string{"echo: hello"}, replies(t, f, id))
}

// serve on PostgreSQL answers the probes, works the fleet's inputs in its
// own workers, and exits 0 on SIGTERM.
func TestServeOnPostgresStopsOnSIGTERM(t *testing.T) {
	f, id, db := echoFleet(t)
	s := startChild(t, 0, append([]string{"serve", "--addr", "127.0.0.1:0", "--workers", "1", "--console", "--console-identity-header", "X-Test-User"}, db...)...)
	addr := s.waitFor(regexp.MustCompile(`^serving the machines of postgres://\S+ \(schema \S+\) on http://(\S+) `), time.Minute)[1]
	for _, path := range []string{"/healthz", "/readyz"} {
		require.Equal(t, http.StatusOK, getStatus(t, "http://"+addr+path, nil), path)
	}
	require.Equal(t, http.StatusOK, getStatus(t, "http://"+addr+"/ui/fleet", http.Header{"X-Test-User": {"dana"}}), "the console's fleet view")
	_, err := f.Send(context.Background(), id, machine.UserText("hi"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(replies(t, f, id)) > 0 }, time.Minute, 20*time.Millisecond)
	require.Equal(t, []string{"echo: hi"}, replies(t, f, id))

	// Resumes over HTTP are accepted through the fleet: 202 at once, or
	// the run's summary for a client that waits.
	ctx := context.Background()
	var suspendIDs []string
	for range 2 {
		mid, err := f.Runner().Create(ctx, "", "echo", nil)
		require.NoError(t, err)
		steps, err := testkit.Collect(f.Runner().Run(ctx, mid, machine.UserText("wait")))
		require.NoError(t, err)
		suspendIDs = append(suspendIDs, steps[len(steps)-1].Suspensions[0].SuspendID)
	}
	body := []byte(`{"payload":"ok"}`)
	resp := signedResume(t, []byte(childSecret), addr, suspendIDs[0], body, "")
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	resp = signedResume(t, []byte(childSecret), addr, suspendIDs[1], body, "wait=50")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var sum resumehttp.Summary
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sum))
	require.True(t, sum.Done)
	require.Equal(t, "resumed", sum.Text)
	require.Eventually(t, func() bool {
		list, err := f.Runner().Pending(ctx, store.Filter{})
		return err == nil && len(list) == 0
	}, time.Minute, 20*time.Millisecond, "the accepted resume is applied")

	s.terminate(time.Minute)
	out := s.out.String()
	require.Contains(t, out, "running the fleet's machines (inputs, deadlines) with 1 workers\n")
	require.Contains(t, out, "shutting down\n")
	require.Contains(t, out, "stopped\n")
}

// getStatus returns the status of a GET of url with header.
func getStatus(t *testing.T, url string, header http.Header) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	maps.Copy(req.Header, header)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
