package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/mcp"
)

// tsClientDir is the Node project of the official TypeScript MCP client,
// v2 (its package-lock.json pins @modelcontextprotocol/client; .ci/run
// installs it with npm ci).
var tsClientDir = filepath.Join("testdata", "tsclient")

// tsRun is what script.mjs saw over one transport.
type tsRun struct {
	Tools []string `json:"tools"`
	Hello struct {
		Text      string `json:"text"`
		MachineID string `json:"machineId"`
	} `json:"hello"`
	InputRequired bool `json:"inputRequired"`
	Ask           struct {
		Method  string         `json:"method"`
		Message string         `json:"message"`
		Schema  map[string]any `json:"schema"`
	} `json:"ask"`
	Bad struct {
		InputRequired bool   `json:"inputRequired"`
		Message       string `json:"message"`
	} `json:"bad"`
	Tampered struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"tampered"`
	Good struct {
		InputRequired bool   `json:"inputRequired"`
		Text          string `json:"text"`
	} `json:"good"`
	Auto struct {
		Text  string `json:"text"`
		Asked string `json:"asked"`
	} `json:"auto"`
}

// TestTypeScriptClient drives the markov binary's "mcp" command with the
// official TypeScript client of the 2026-07-28 protocol, over stdio (the
// script spawns it) and over Streamable HTTP (a "markov mcp --http"
// child): list the tools, talk, get input_required for the demo's
// refund, answer badly (input_required again, with the violation), send
// a tampered requestState (a protocol error), answer well (the result);
// then let the client's own driver answer an input request.
func TestTypeScriptClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, bin, url := tsSetup(ctx, t)
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, node, "script.mjs", bin, filepath.Join(tmp, "stdio.db"), url)
	cmd.Dir = tsClientDir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "node script.mjs: %s", stdout)
	var r map[string]tsRun
	require.NoError(t, json.Unmarshal(stdout, &r), "%s", stdout)
	t.Logf("%s", stdout)

	for _, kind := range []string{"stdio", "http"} {
		run := r[kind]
		require.Equal(t, []string{"send_message"}, run.Tools, kind)
		require.Equal(t, "You said: hello there. That is all I have to say about it.", run.Hello.Text, kind)
		require.True(t, strings.HasPrefix(run.Hello.MachineID, "mcp_"), kind)

		require.True(t, run.InputRequired, kind)
		require.Equal(t, "elicitation/create", run.Ask.Method, kind)
		require.Equal(t, "refund of order 42 needs a manager", run.Ask.Message, kind)
		require.Equal(t, []any{"approved", "manager"}, run.Ask.Schema["required"], kind)

		require.True(t, run.Bad.InputRequired, kind)
		require.Equal(t, "refund of order 42 needs a manager\n\nThe answer was refused: approved: expected boolean, got string", run.Bad.Message, kind)

		require.Equal(t, -32602, run.Tampered.Code, kind)
		require.Contains(t, run.Tampered.Message, "requestState: bridge: bad continuation token: signature does not match", kind)

		require.False(t, run.Good.InputRequired, kind)
		require.Equal(t, "Done: order 42 refunded, approved by ts-e2e", run.Good.Text, kind)

		require.Equal(t, "a human must answer: what color?", run.Auto.Asked, kind)
		require.Equal(t, `Done: the answer to "what color?" is "purple"`, run.Auto.Text, kind)
	}
}

// tsSetup finds Node and the TypeScript clients (skipping, or failing in
// CI, without them), builds the markov binary and starts "markov mcp
// --http" on the ACP demo's charter; it returns node, the binary and the
// server's URL.
func tsSetup(ctx context.Context, t *testing.T) (node, bin, url string) {
	t.Helper()
	node, err := exec.LookPath("node")
	testkit.Require(t, err, "Node.js", "apt-get install nodejs npm, then cd mcp/testdata/tsclient && npm ci (or .ci/run)")
	for _, pkg := range []string{"client", "sdk"} {
		_, err = os.Stat(filepath.Join(tsClientDir, "node_modules", "@modelcontextprotocol", pkg, "package.json"))
		testkit.Require(t, err, "the TypeScript MCP clients", "cd mcp/testdata/tsclient && npm ci (or .ci/run)")
	}
	tmp := t.TempDir()
	bin = filepath.Join(tmp, "markov")
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/markov-agents/markov/cmd/markov").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return node, bin, serveMCP(ctx, t, bin, filepath.Join(tmp, "http.db"))
}

// serveMCP starts "markov mcp --http" of bin on database db, on the ACP
// demo's charter, and returns its URL.
func serveMCP(ctx context.Context, t *testing.T, bin, db string) (url string) {
	t.Helper()
	srv := exec.CommandContext(ctx, bin, "mcp", "--db", db, "--http", "127.0.0.1:0", "--task-wait", "1m", "--poll-interval", "20ms")
	srv.Env = append(os.Environ(), "MARKOV_CHARTER=acpdemo", "MARKOV_MCP_SECRET=a-test-secret-of-at-least-32-bytes!!")
	stderr, err := srv.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	logged := make(chan struct{})
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		<-logged // the log ends with the process's stderr
		_ = srv.Wait()
	})
	lines := bufio.NewScanner(stderr)
	for url == "" && lines.Scan() {
		if _, u, ok := strings.Cut(lines.Text(), " on "); ok && strings.HasPrefix(lines.Text(), "serving MCP") {
			url = u
		}
	}
	go func() {
		defer close(logged)
		for lines.Scan() {
			t.Log(lines.Text())
		}
	}()
	require.NotEmpty(t, url, "markov mcp --http did not say where it listens")
	return url
}

// TestTypeScriptTasks drives the markov binary's "mcp" command with the
// official TypeScript client of the 2026-07-28 protocol declaring the
// tasks extension (testdata/tsclient/tasks.mjs), over stdio and over two
// "markov mcp --http" processes on one SQLite file: the demo's refund is
// answered with a task (input_required); tasks/get from the other
// process shows its form; a refused answer is a -32602 and consumes
// nothing; the answer, given to the other process, completes the task
// with the run's answer; tasks/cancel cancels a second refund's task; a
// tampered task ID is refused.
func TestTypeScriptTasks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, bin, _ := tsSetup(ctx, t)
	db := filepath.Join(t.TempDir(), "shared.db")
	url1, url2 := serveMCP(ctx, t, bin, db), serveMCP(ctx, t, bin, db)
	cmd := exec.CommandContext(ctx, node, "tasks.mjs", bin, filepath.Join(t.TempDir(), "stdio.db"), url1, url2)
	cmd.Dir = tsClientDir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "node tasks.mjs: %s", stdout)
	t.Logf("%s", stdout)
	var r map[string]struct {
		Created struct {
			ResultType     string `json:"resultType"`
			Status         string `json:"status"`
			PollIntervalMs int    `json:"pollIntervalMs"`
			TTLMs          int64  `json:"ttlMs"`
		} `json:"created"`
		Get struct {
			Status, Method, Message string
			Schema                  map[string]any
		} `json:"get"`
		Bad struct {
			Code            int
			Message, Status string
		} `json:"bad"`
		Done      struct{ Status, Text string } `json:"done"`
		Cancelled struct{ Status string }       `json:"cancelled"`
		Tampered  struct {
			Code    int
			Message string
		} `json:"tampered"`
	}
	require.NoError(t, json.Unmarshal(stdout, &r), "%s", stdout)
	for _, kind := range []string{"stdio", "http"} {
		run := r[kind]
		require.Equal(t, "task", run.Created.ResultType, kind)
		require.Equal(t, "input_required", run.Created.Status, kind)
		require.Equal(t, (24 * time.Hour).Milliseconds(), run.Created.TTLMs, kind)
		require.Equal(t, "input_required", run.Get.Status, kind)
		require.Equal(t, "elicitation/create", run.Get.Method, kind)
		require.Equal(t, "refund of order 42 needs a manager", run.Get.Message, kind)
		require.Equal(t, []any{"approved", "manager"}, run.Get.Schema["required"], kind)
		require.Equal(t, -32602, run.Bad.Code, kind)
		require.Contains(t, run.Bad.Message, "the answer was refused: approved: expected boolean, got string", kind)
		require.Equal(t, "input_required", run.Bad.Status, kind)
		require.Equal(t, "completed", run.Done.Status, kind)
		require.Equal(t, "Done: order 42 refunded, approved by ts-tasks", run.Done.Text, kind)
		require.Equal(t, "cancelled", run.Cancelled.Status, kind)
		require.Equal(t, -32602, run.Tampered.Code, kind)
		require.Contains(t, run.Tampered.Message, "task not found", kind)
	}
	require.Equal(t, 20, r["http"].Created.PollIntervalMs)
}

// TestTypeScriptClientV1 drives the markov binary's "mcp" command with
// the official TypeScript client of protocol 2025-11-25, v1
// (testdata/tsclient/legacy.mjs): over stdio the Go SDK's shim asks it
// with elicitation/create during the call and the call returns the
// run's answer; over stateless HTTP it cannot be asked, and the call
// returns the waiting result.
func TestTypeScriptClientV1(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, bin, url := tsSetup(ctx, t)
	cmd := exec.CommandContext(ctx, node, "legacy.mjs", bin, filepath.Join(t.TempDir(), "stdio.db"), url)
	cmd.Dir = tsClientDir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "node legacy.mjs: %s", stdout)
	t.Logf("%s", stdout)
	var r struct {
		Stdio struct {
			Text  string `json:"text"`
			Asked []struct {
				Message string         `json:"message"`
				Schema  map[string]any `json:"schema"`
			} `json:"asked"`
		} `json:"stdio"`
		HTTP struct {
			Text       string      `json:"text"`
			Structured mcp.Waiting `json:"structured"`
			IsError    bool        `json:"isError"`
		} `json:"http"`
	}
	require.NoError(t, json.Unmarshal(stdout, &r), "%s", stdout)
	require.Len(t, r.Stdio.Asked, 1)
	require.Equal(t, "refund of order 7 needs a manager", r.Stdio.Asked[0].Message)
	require.Equal(t, []any{"approved", "manager"}, r.Stdio.Asked[0].Schema["required"])
	require.Equal(t, "Done: order 7 refunded, approved by ts-v1", r.Stdio.Text)

	require.False(t, r.HTTP.IsError)
	w := r.HTTP.Structured
	require.Equal(t, "input_required", w.Status)
	require.Equal(t, mcp.ConversationID("v1-http"), w.MachineID)
	require.Len(t, w.Pending, 1)
	require.Equal(t, "a human must answer: what color?", w.Pending[0].Reason)
	require.Equal(t, "machine "+w.MachineID+" waits for input:\n- "+w.Pending[0].SuspendID+": a human must answer: what color?", r.HTTP.Text)
}
