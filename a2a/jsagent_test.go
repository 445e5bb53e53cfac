package a2a_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm/scripted"
)

const jsAgentDir = "testdata/jsagent"

// jsAgent starts the agent built with the official JavaScript SDK's
// server (skipping, or failing in CI, without Node or its package) and
// returns its URL.
func jsAgent(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	testkit.Require(t, err, "Node.js", "apt-get install nodejs npm, then cd a2a/testdata/jsagent && npm ci (or .ci/run)")
	_, err = os.Stat(filepath.Join(jsAgentDir, "node_modules", "@a2a-js", "sdk", "package.json"))
	testkit.Require(t, err, "the JavaScript A2A SDK", "cd a2a/testdata/jsagent && npm ci (or .ci/run)")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "agent.mjs")
	cmd.Dir = jsAgentDir
	stderr := &testkit.SyncBuffer{} // its complaints of our 404s, shown on failure
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the JavaScript agent's stderr:\n%s", stderr.String())
		}
	})
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case line <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-line:
		var ready struct{ URL string }
		require.NoError(t, json.Unmarshal([]byte(l), &ready), l)
		return ready.URL
	case <-time.After(30 * time.Second):
		t.Fatal("the JavaScript agent did not start")
	}
	return ""
}

// release lets the JavaScript agent's waiting tasks finish.
func release(t *testing.T, url string) {
	t.Helper()
	res, err := http.Post(url+"/release", "application/json", nil)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
}

// A charter delegates to the JavaScript agent: its task goes
// input-required, is answered here (a Go resume), and completes with a
// push notification.
func TestJSAgentInputRequiredThenPush(t *testing.T) {
	url := jsAgent(t)
	e, q := askColor(t, url, "JS Painter")
	e.answer(t, q.SuspendID, "red")
	w := e.pending(t)
	require.NotEmpty(t, w.Conditions().Event)

	release(t, url)
	e.pushedUntilDone(t)
	require.Equal(t, []string{"painted red"}, e.results(t))
}

// Without push notifications the call polls the JavaScript agent.
func TestJSAgentPolls(t *testing.T) {
	url := jsAgent(t)
	e := newEnv(t, a2a.Config{URL: url, Wait: 50 * time.Millisecond, PollMin: 10 * time.Millisecond, PollMax: 20 * time.Millisecond},
		scripted.Tool("painter", a2a.Request{Message: "slow"}), scripted.Text("done"))
	e.start(t)
	w := e.pending(t)
	require.Empty(t, w.Conditions().Event)
	sweepUntil(t, e, func() bool { return e.pollsOf(t) >= 1 })
	release(t, url)
	sweepUntil(t, e, func() bool { return len(e.results(t)) > 0 })
	require.Equal(t, []string{"slow done"}, e.results(t))
}
