package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/machine"
)

// watch prints a machine's log as text, from the start or after a
// sequence number, and as JSON lines, one durable.Event each.
func TestWatch(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)
	res := run(t, charter, "watch", "--db", db, "--until-done", machineID)
	require.Equal(t, 0, res.code, res.stderr)
	for _, want := range []string{
		"assistant: I'm sorry about the blender. I'll ask a manager to approve the refund.\n",
		"→ request_refund {\"order_id\":\"A-1042\",\"amount\":89.9,\"reason\":\"arrived broken\"}\n",
		"← request_refund suspended (" + suspendID + ")\n",
		"  suspend ID: " + suspendID + "\n",
		"[step: suspend, done: true]\n",
	} {
		require.Contains(t, res.stdout, want)
	}

	res = run(t, charter, "watch", "--db", db, "--until-done", "-o", "json", machineID)
	require.Equal(t, 0, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	var events []durable.Event
	for i, l := range lines {
		var e durable.Event
		require.NoError(t, json.Unmarshal([]byte(l), &e), l)
		require.Equal(t, int64(i+1), e.Seq)
		events = append(events, e)
	}
	require.Equal(t, machine.EventStep, events[len(events)-1].Kind)

	// After the suspension: the resume's run only.
	after := events[len(events)-1].Seq
	require.Equal(t, 0, run(t, charter, "resume", "--db", db, suspendID, `{"approved":true,"manager":"dana"}`).code)
	res = run(t, charter, "watch", "--db", db, "--until-done", "--after", strconv.FormatInt(after, 10), machineID)
	require.Equal(t, 0, res.code, res.stderr)
	// What the resume handler changed, then the resume (machine.Events's
	// order: the inputs' state changes come before their lifecycle events).
	got := strings.SplitN(res.stdout, "\n", 3)
	require.Len(t, got, 3, res.stdout)
	require.Regexp(t, `^state of support \(\w+\): \{"refunded":\["A-1042"\]\}$`, got[0])
	require.Equal(t, "suspension "+suspendID+" resumed (tool request_refund)", got[1])
	require.Contains(t, res.stdout, "assistant: Update on your refund")
	require.NotContains(t, res.stdout, "→ request_refund")
}

func TestWatchUsage(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, _ := parked(t, charter)
	require.Equal(t, ExitUsage, run(t, charter, "watch", "--db", db).code)
	require.Equal(t, ExitUsage, run(t, charter, "watch", "--db", db, "--after", "-1", machineID).code)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := &CLI{Name: "markov", Charter: charter}
	require.NoError(t, c.Run(ctx, []string{"watch", "--db", db, machineID}), "an interrupted watch is no error")
}
