package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/cmd/markov/cli"
)

// asMarkov, set in the environment, makes the test binary behave as the
// markov command: the demo re-executes os.Executable(), which is the test
// binary under go test.
const asMarkov = "MARKOV_TEST_RUN_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMarkov) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	// Hermetic: the scripted model, whatever the developer's environment,
	// in this process and in the child processes.
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MARKOV_MODEL"} {
		os.Unsetenv(k)
	}
	os.Setenv(asMarkov, "1")
	os.Exit(m.Run())
}

var (
	suspendIDLine = regexp.MustCompile(`(?m)^  suspend ID: (\S+)$`)
	machineLine   = regexp.MustCompile(`(?m)^created machine (m_\S+) \(node support\)$`)
	databaseLine  = regexp.MustCompile(`(?m)^database: (\S+)`)
)

const finalAnswer = "Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana@example.com."

// checkDemo asserts what every demo run prints, and returns the machine
// ID.
func checkDemo(t *testing.T, out string) string {
	t.Helper()
	id := suspendIDLine.FindStringSubmatch(out)
	require.NotNil(t, id, "no suspend ID in:\n%s", out)
	m := machineLine.FindStringSubmatch(out)
	require.NotNil(t, m, "no machine in:\n%s", out)
	for _, want := range []string{
		"model: scripted (offline; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one)\n",
		"── process 1 (pid ",
		"customer: " + "Hi, the blender from order A-1042 arrived broken. Can I get my $89.90 back?\n",
		"[step: suspend, done: true]\n",
		"→ request_refund {\"order_id\":\"A-1042\",\"amount\":89.9,\"reason\":\"arrived broken\"}\n",
		"← request_refund suspended (" + id[1] + ")\n",
		"pending tool call\n",
		"  tool:       request_refund\n",
		"  input:      {\"order_id\":\"A-1042\",\"amount\":89.9,\"reason\":\"arrived broken\"}\n",
		"  reason:     refund of $89.90 for order A-1042 needs a manager's approval\n",
		"(48h0m0s after suspension); then the call fails\n",
		"process 1 stops here: machine " + m[1],
		"── the manager decides on " + id[1] + ": {\"approved\":true,\"manager\":\"dana@example.com\"}\n",
		// The second process: its own pid, the resume by suspend ID, the
		// final answer.
		" resume --db ",
		"  │ resuming suspension " + id[1] + " of machine " + m[1],
		"  │ tool result: refund of $89.90 for order A-1042 issued, approved by dana@example.com\n",
		"  │ final answer: " + finalAnswer + "\n",
		"── process 2 exited\n",
		// The first process reads the final state back.
		"read the machine back from the store\n",
		"    state: {\"refunded\":[\"A-1042\"]}\n",
		"pending: none\n",
		"ledger: refunded [A-1042]\n",
	} {
		require.Contains(t, out, want)
	}
	require.True(t, strings.HasSuffix(out, "final answer: "+finalAnswer+"\n") ||
		strings.Contains(out, "final answer: "+finalAnswer+"\n\nexplore it:"), out)

	pids := regexp.MustCompile(`── process (\d) \(pid (\d+)\)`).FindAllStringSubmatch(out, -1)
	require.GreaterOrEqual(t, len(pids), 3, out)
	require.Equal(t, "2", pids[1][1])
	require.NotEqual(t, pids[0][2], pids[1][2], "the resume runs in another process")
	return m[1]
}

func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"demo"}, &out, &errb)
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	checkDemo(t, out.String())
	require.Empty(t, errb.String())

	// The temporary database is gone.
	db := databaseLine.FindStringSubmatch(out.String())
	require.NotNil(t, db)
	require.Contains(t, out.String(), "(temporary; pass --db FILE to keep it)")
	require.NoFileExists(t, db[1])
}

func TestDemoKeepsItsDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"demo", "--db", path}, &out, &errb)
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	id := checkDemo(t, out.String())
	require.Contains(t, out.String(), "database: "+path+"\n")
	require.Contains(t, out.String(), "explore it: markov inspect --db "+path+" "+id)

	// The other commands see it.
	out.Reset()
	require.Equal(t, cli.ExitOK, run(context.Background(), []string{"pending", "--db", path}, &out, &errb))
	require.Equal(t, "no pending suspensions in "+path+"\n", out.String())
	out.Reset()
	require.Equal(t, cli.ExitOK, run(context.Background(), []string{"inspect", "--db", path, id}, &out, &errb))
	require.Contains(t, out.String(), "assistant: "+finalAnswer+"\n")
}

func TestUsageListsTheDemo(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, cli.ExitUsage, run(context.Background(), nil, &out, &errb))
	require.Contains(t, errb.String(), "usage: markov [--store FILE|URL] <command> [flags] [args]\n\ncommands:\n  demo      run the refund demo")
}

// TestBinary builds the markov command and runs its demo as a real user
// would, in an empty directory.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	bin := filepath.Join(t.TempDir(), "markov")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	dir := t.TempDir()
	cmd := exec.Command(bin, "demo")
	cmd.Dir = dir
	cmd.Env = withoutEnv(os.Environ(), asMarkov)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	checkDemo(t, stdout.String())
	require.Contains(t, stdout.String(), "── process 2 (pid ")
	require.Contains(t, stdout.String(), "): markov resume --db ")
	require.Empty(t, stderr.String())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the demo leaves the current directory alone")

	// A failing command exits non-zero with a readable error.
	cmd = exec.Command(bin, "pending")
	cmd.Dir = dir
	cmd.Env = cmd.Environ()
	stderr.Reset()
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, cli.ExitError, exit.ExitCode())
	require.Equal(t, "markov: database markov.db does not exist (pass --db FILE, or create a machine in it with 'markov create --db markov.db <node>')\n", stderr.String())

	// Help goes to stdout with exit status 0; a bad command line prints
	// the usage on stderr and exits with 2.
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"resume", "-h"}, {"help", "demo"}} {
		cmd = exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		require.NoError(t, err, "%v", args)
		require.Contains(t, string(out), "usage: markov ", "%v", args)
	}
	for _, args := range [][]string{{"frobnicate"}, {"pending", "-o", "yaml"}} {
		cmd = exec.Command(bin, args...)
		cmd.Dir = dir
		stderr.Reset()
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.ErrorAs(t, err, &exit, "%v", args)
		require.Equal(t, cli.ExitUsage, exit.ExitCode(), "%v", args)
		require.Empty(t, out, "%v", args)
		require.Contains(t, stderr.String(), "usage: markov", "%v", args)
	}

	// version reads the binary's build information.
	cmd = exec.Command(bin, "version")
	cmd.Dir = dir
	out, err = cmd.Output()
	require.NoError(t, err)
	require.Regexp(t, `^markov (\(devel\)|v\S+)\nbuilt with go1\.\S+\n$`, string(out))
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no command above creates a database")
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
