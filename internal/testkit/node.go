package testkit

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Node starts `node script` in dir, a testdata folder whose packages
// `npm ci` installs there, with env added to its environment, and
// returns the first line the script prints (its address, say). Without
// Node, or without the package pkg under dir's node_modules, tb stops as
// Require says; the message names the `npm ci` that installs it. The
// process ends with the test; its stderr is logged when the test fails.
func Node(tb testing.TB, dir, script, pkg string, env ...string) string {
	tb.Helper()
	install := "cd " + dir + " && npm ci (or .ci/run)"
	node, err := exec.LookPath("node")
	Require(tb, err, "Node.js", "apt-get install nodejs npm, then "+install)
	_, err = os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
	Require(tb, err, "the Node package "+pkg, install)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stderr := &SyncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("node %s: %v", script, err)
	}
	tb.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if tb.Failed() {
			tb.Logf("node %s's stderr:\n%s", script, stderr.String())
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() { // keep draining, so the script never blocks on its stdout
		}
	}()
	select {
	case l, ok := <-line:
		if !ok {
			tb.Fatalf("node %s exited before it printed a line:\n%s", script, stderr.String())
		}
		return l
	case <-time.After(30 * time.Second):
		tb.Fatalf("node %s printed nothing in 30s:\n%s", script, stderr.String())
	}
	return ""
}
