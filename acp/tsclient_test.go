package acp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/internal/testkit"
)

// tsClientDir is the Node project of the official TypeScript ACP client
// (its package-lock.json pins @agentclientprotocol/sdk; .ci/run installs
// it with npm ci).
var tsClientDir = filepath.Join("testdata", "tsclient")

// tsResult is what script.mjs prints.
type tsResult struct {
	Initialize struct {
		LoadSession bool           `json:"loadSession"`
		Suspend     map[string]any `json:"suspend"`
	} `json:"initialize"`
	SessionID string `json:"sessionId"`
	Chunks    struct {
		StopReason string `json:"stopReason"`
		Count      int    `json:"count"`
		Text       string `json:"text"`
	} `json:"chunks"`
	Allow struct {
		StopReason string           `json:"stopReason"`
		Permission []map[string]any `json:"permission"`
		Text       string           `json:"text"`
		Statuses   []string         `json:"statuses"`
	} `json:"allow"`
	Deny struct {
		Permission []map[string]any `json:"permission"`
		Text       string           `json:"text"`
	} `json:"deny"`
	Pending struct {
		Reason string `json:"reason"`
		Status string `json:"status"`
	} `json:"pending"`
	ResumeInput struct {
		StopReason string `json:"stopReason"`
		Text       string `json:"text"`
	} `json:"resumeInput"`
	Modes map[string]struct {
		Response         map[string]any   `json:"response"`
		PromptStop       string           `json:"promptStop"`
		Rounds           int              `json:"rounds"`
		SuspendedUpdates []map[string]any `json:"suspendedUpdates"`
		ResumeStop       string           `json:"resumeStop"`
		ResumedUpdates   []map[string]any `json:"resumedUpdates"`
		AfterResume      string           `json:"afterResume"`
	} `json:"modes"`
	Await struct {
		StopReason       string           `json:"stopReason"`
		Params           map[string]any   `json:"params"`
		SuspendedUpdates []map[string]any `json:"suspendedUpdates"`
	} `json:"await"`
	Signal struct {
		Stdout  string         `json:"stdout"`
		Resumed map[string]any `json:"resumed"`
		Text    string         `json:"text"`
	} `json:"signal"`
	Load struct {
		User      []string `json:"user"`
		ToolCalls int      `json:"toolCalls"`
		Text      string   `json:"text"`
	} `json:"load"`
	ExitCode int `json:"exitCode"`
}

// TestTypeScriptClient drives the markov binary's "acp" command, as a
// child process over stdio, with the official TypeScript ACP client: a
// Node script (testdata/tsclient/script.mjs) that spawns it, runs every
// path — initialize, a new session, a prompt with streamed chunks, a
// permission request allowed and another denied, a pending tool call
// resumed with an input, session/suspend in each mode, resumes with an
// input and with continueTranscript false, session/await_resumption, a
// resume by a signal from another process (markov signal), session/load
// — and prints what it saw.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	testkit.Require(t, err, "Node.js", "apt-get install nodejs npm, then cd acp/testdata/tsclient && npm ci (or .ci/run)")
	_, err = os.Stat(filepath.Join(tsClientDir, "node_modules", "@agentclientprotocol", "sdk", "package.json"))
	testkit.Require(t, err, "the TypeScript ACP client", "cd acp/testdata/tsclient && npm ci (or .ci/run)")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "markov")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/markov-agents/markov/cmd/markov").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "script.mjs", bin, filepath.Join(tmp, "acp.db"))
	cmd.Dir = tsClientDir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "node script.mjs: %s", stdout)
	var r tsResult
	require.NoError(t, json.Unmarshal(stdout, &r), "%s", stdout)
	t.Logf("%s", stdout)

	require.True(t, r.Initialize.LoadSession)
	require.Equal(t, true, r.Initialize.Suspend["supportsSuspend"])
	require.Equal(t, true, r.Initialize.Suspend["supportsAwaitResumption"])

	require.Equal(t, "end_turn", r.Chunks.StopReason)
	require.Equal(t, "You said: hello there. That is all I have to say about it.", r.Chunks.Text)
	require.Greater(t, r.Chunks.Count, 5)

	require.Len(t, r.Allow.Permission, 1)
	require.Equal(t, "deploy", r.Allow.Permission[0]["title"])
	require.Equal(t, "allow", r.Allow.Permission[0]["optionId"])
	require.Equal(t, "Done: api deployed", r.Allow.Text)
	require.Equal(t, []string{"in_progress", "pending", "completed"}, r.Allow.Statuses)
	require.Len(t, r.Deny.Permission, 1)
	require.Equal(t, "deny", r.Deny.Permission[0]["optionId"])
	require.Equal(t, "Done: refund of order 42 declined by ts-e2e", r.Deny.Text)

	require.Equal(t, "pending", r.Pending.Status)
	require.Equal(t, "a human must answer: what color?", r.Pending.Reason)
	require.Equal(t, `Done: the answer to "what color?" is "blue"`, r.ResumeInput.Text)

	require.Len(t, r.Modes, 3)
	for mode, m := range r.Modes {
		require.Equal(t, "end_turn", m.PromptStop, mode)
		require.NotEmpty(t, m.Response["handle"], mode)
		require.NotEmpty(t, m.Response["suspendedAt"], mode)
		require.Len(t, m.SuspendedUpdates, 1, mode)
		require.Equal(t, "client", m.SuspendedUpdates[0]["initiator"], mode)
		require.Equal(t, m.Response["handle"], m.SuspendedUpdates[0]["handle"], mode)
		require.Len(t, m.ResumedUpdates, 1, mode)
		require.Equal(t, "explicit_resume", m.ResumedUpdates[0]["cause"], mode)
		require.Equal(t, "end_turn", m.ResumeStop, mode)
	}
	require.Equal(t, 4, r.Modes["wait_for_completion"].Rounds, "the turn resolves before the suspension")
	require.Equal(t, true, r.Modes["finish_step"].ResumedUpdates[0]["hadResumeInput"])
	require.Equal(t, false, r.Modes["interrupt_immediate"].ResumedUpdates[0]["continueTranscript"])
	require.Equal(t, true, r.Modes["wait_for_completion"].ResumedUpdates[0]["continueTranscript"])

	require.Equal(t, "end_turn", r.Await.StopReason)
	require.Equal(t, "waiting for ci.passed", r.Await.Params["reason"])
	require.Equal(t, map[string]any{"onEvent": "ci.passed"}, r.Await.Params["conditions"])
	require.Len(t, r.Await.SuspendedUpdates, 1)
	require.Equal(t, "agent", r.Await.SuspendedUpdates[0]["initiator"])

	require.Equal(t, "condition_fired", r.Signal.Resumed["cause"])
	require.Equal(t, "signal ci.passed woke 1 suspension(s)", r.Signal.Stdout)
	require.Contains(t, r.Signal.Text, `Done: ci.passed happened: "green"`)

	require.Equal(t, "hello there", r.Load.User[0])
	require.Contains(t, r.Load.User, "wait ci.passed")
	require.GreaterOrEqual(t, r.Load.ToolCalls, 5)
	require.Contains(t, r.Load.Text, "Done: api deployed")
	require.Equal(t, 0, r.ExitCode)
}
