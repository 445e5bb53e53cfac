package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

// The test binary is the second process too: start re-executes
// os.Executable() with the resume argument, which lands here.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == resumeArg {
		main()
		return
	}
	os.Exit(m.Run())
}

// line is one line of output: the writing process and the text.
var line = regexp.MustCompile(`^\[pid (\d+)\] (.*)$`)

func TestTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "machines.db")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{path}, &out))

	// Each line is attributed to the process that wrote it.
	var pids []string
	byPID := make(map[string][]string)
	for l := range strings.Lines(strings.TrimSpace(out.String())) {
		m := line.FindStringSubmatch(strings.TrimSuffix(l, "\n"))
		require.NotNil(t, m, "line without a pid: %q", l)
		if _, ok := byPID[m[1]]; !ok {
			pids = append(pids, m[1])
		}
		byPID[m[1]] = append(byPID[m[1]], m[2])
	}
	require.Len(t, pids, 2, "want two processes:\n%s", &out)
	first, second := strings.Join(byPID[pids[0]], "\n"), strings.Join(byPID[pids[1]], "\n")
	require.Contains(t, first, "suspended: request_refund (refund of $89.90 for order A-1042 needs a manager's approval)")
	require.NotContains(t, first, "assistant: Update on your refund")
	require.Contains(t, second, "assistant: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.")
	require.Contains(t, second, "refunded: A-1042")

	// The file holds the outcome: the suspension is resolved, and a second
	// resume of it fails and changes nothing.
	id := regexp.MustCompile(`suspend ID (\S+) saved`).FindStringSubmatch(first)
	require.NotNil(t, id, first)
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	require.NoError(t, err)
	sp, err := s.FindSuspension(context.Background(), id[1])
	require.NoError(t, err)
	require.Equal(t, store.StatusResolved, sp.Status)
	require.NoError(t, s.Close())
	err = run(context.Background(), []string{resumeArg, path, id[1]}, &bytes.Buffer{})
	require.ErrorIs(t, err, instance.ErrAlreadyResolved)
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"a", "b"},
		{resumeArg},
		{resumeArg, filepath.Join(dir, "missing.db"), "id"},
	} {
		require.Error(t, run(context.Background(), args, &bytes.Buffer{}), "%q", args)
	}
	_, err := os.Stat(filepath.Join(dir, "missing.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "a resume created the missing database")
}
