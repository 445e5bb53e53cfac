package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// The test binary is the worker process too: accept re-executes
// os.Executable() with the worker argument, which lands here.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == workerArg {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestFleet runs the example on the database MARKOV_TEST_POSTGRES names,
// in a schema of its own: without it the test skips (and fails under CI),
// naming how to set it.
func TestFleet(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{url, schema}, &out))
	require.Regexp(t, regexp.MustCompile(`(?s)^worker ran \S+ until it waits: refund of \$89\.90 for order A-1042 needs a manager's approval
assistant: .*approved by dana\.
the run of \S+ ended: end_turn
$`), out.String())
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {workerArg}, {workerArg, "url"}, {"a", "b", "c"}} {
		require.ErrorContains(t, run(context.Background(), args, &bytes.Buffer{}), "usage:", "%q", args)
	}
}
