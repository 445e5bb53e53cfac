package cli

import (
	"encoding/json"
	"testing"

	"github.com/markov-agents/markov/resumehttp"
	"github.com/stretchr/testify/require"
)

func TestSuspendAndSignal(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)
	r := run(t, charter, "suspend", "--db", db, "--event", "ci.passed", "--timeout", "1h", "--on-timeout", "resume_with_summary", "-o", "json", machineID, "review", "please")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var sus resumehttp.SuspendResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sus))
	require.NotEmpty(t, sus.Handle)
	require.True(t, sus.Applied)
	require.Equal(t, machineID, sus.MachineID)
	require.Equal(t, "review please", sus.Reason)
	require.Equal(t, "finish_step", sus.Mode)
	require.Equal(t, "ci.passed", sus.ResumeWhen.OnEvent)
	require.Equal(t, "resume_with_summary", sus.ResumeWhen.Timeout.OnTimeout)
	require.Equal(t, 60.0, sus.ResumeWhen.Timeout.DurationMinutes)
	require.Equal(t, sus.SuspendedAt.Add(3600e9), sus.Deadline)
	require.Contains(t, sus.Summary, `or the event "ci.passed"`)

	pending := run(t, charter, "pending", "--db", db, "--machine", machineID)
	require.Contains(t, pending.stdout, sus.Handle)
	require.Contains(t, pending.stdout, suspendID)

	r = run(t, charter, "signal", "--db", db, "ci.passed", `"go on"`)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "signal ci.passed woke 1 suspension(s)\n", r.stdout)
	r = run(t, charter, "signal", "--db", db, "-o", "json", "ci.passed")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.JSONEq(t, `{"event":"ci.passed","woken":0}`, r.stdout)

	// The tool's own suspension is still there; resume it in a fresh turn.
	r = run(t, charter, "resume", "--db", db, "--fresh-turn", suspendID, `{"approved":true,"manager":"dana"}`)
	require.Equal(t, ExitOK, r.code, r.stderr)

	r = run(t, charter, "suspend", "--db", db, machineID)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "suspended machine "+machineID+" at ")
	require.Contains(t, r.stdout, "resume with 'markov resume ")
}

func TestSuspendAndSignalRefuseBadInput(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, _ := parked(t, charter)
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"suspend", "--db", db, "--mode", "later", machineID}, ExitUsage, `mode "later"`},
		{[]string{"suspend", "--db", db, "--event", "bad\nname", machineID}, ExitUsage, "invalid event name"},
		{[]string{"suspend", "--db", db, "--on-timeout", "resume_with_summary", machineID}, ExitUsage, "without a timeout"},
		{[]string{"suspend", "--db", db, "--timeout", "1m", "--input", "{nope", machineID}, ExitUsage, "not valid JSON"},
		{[]string{"suspend", "--db", db}, ExitUsage, "want a machine ID"},
		{[]string{"suspend", "--db", db, "nope"}, ExitError, "no machine nope"},
		{[]string{"signal", "--db", db}, ExitUsage, "want an event name"},
		{[]string{"signal", "--db", db, "a\x01b"}, ExitUsage, "invalid event name"},
		{[]string{"signal", "--db", db, "ci", "{nope"}, ExitUsage, "not valid JSON"},
	} {
		r := run(t, charter, c.args...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.stderr, "%v", c.args)
	}
	pending := run(t, charter, "pending", "--db", db, "-o", "json")
	var calls []Call
	require.NoError(t, json.Unmarshal([]byte(pending.stdout), &calls))
	require.Len(t, calls, 1, "nothing changed")
}
