package cli

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers
// (serve logs from its handler goroutines).
type syncBuffer = testkit.SyncBuffer

// result is what one command line did.
type result struct {
	code           int
	stdout, stderr string
}

// run runs args on a fresh CLI for charter and returns what it did.
func run(t *testing.T, charter *machine.Charter, args ...string) result {
	t.Helper()
	var out, errb syncBuffer
	c := &CLI{Name: "markov", Charter: charter, Model: "test model", Stdout: &out, Stderr: &errb}
	code := c.Main(context.Background(), args)
	return result{code, out.String(), errb.String()}
}

func refundCharter(t *testing.T) *machine.Charter {
	t.Helper()
	c, err := refund.NewCharter(refund.ScriptedModel())
	require.NoError(t, err)
	return c
}

// parked creates a database at a temporary path holding one refund
// machine suspended on request_refund and returns the path, the machine
// ID and the suspend ID.
func parked(t *testing.T, charter *machine.Charter) (db, machineID, suspendID string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "test.db")
	machineID, suspendID = park(t, charter, db)
	return db, machineID, suspendID
}

// park adds a suspended refund machine to the database at path.
func park(t *testing.T, charter *machine.Charter, path string) (machineID, suspendID string) {
	t.Helper()
	machineIDs, suspendIDs := parkAll(t, charter, path, refund.NodeName, refund.CustomerRequest, 1)
	return machineIDs[0], suspendIDs[0]
}

// parkAll adds n machines of charter at node start to the database at path,
// each run on the user message text until it suspends once, and returns
// their machine and suspend IDs.
func parkAll(t *testing.T, charter *machine.Charter, path, start, text string, n int) (machineIDs, suspendIDs []string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	require.NoError(t, err)
	defer st.Close()
	r, err := durable.New(durable.Config{Store: st, Charter: charter})
	require.NoError(t, err)
	for range n {
		id, err := r.Create(ctx, "", start, nil)
		require.NoError(t, err)
		var last machine.Step
		for step, err := range r.Run(ctx, id, machine.UserText(text)) {
			require.NoError(t, err)
			last = step
		}
		require.True(t, last.NeedsResume())
		require.Len(t, last.Suspensions, 1)
		machineIDs, suspendIDs = append(machineIDs, id), append(suspendIDs, last.Suspensions[0].SuspendID)
	}
	return machineIDs, suspendIDs
}

func TestUsage(t *testing.T) {
	charter := refundCharter(t)
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		noStdout   bool
		emptyError bool
	}{
		{name: "no command", args: nil, code: ExitUsage, stderr: []string{"markov: no command given", "usage: markov [--store FILE|URL] <command>", "pending", "inspect", "resume", "cancel", "graph", "serve"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: ExitUsage, stderr: []string{`markov: unknown command "frobnicate"`}},
		{name: "help", args: []string{"help"}, code: ExitOK, stdout: []string{"usage: markov [--store FILE|URL] <command>", "\n  resume    resume a suspension with a JSON payload", "Every command takes --store"}},
		{name: "-h", args: []string{"-h"}, code: ExitOK, stdout: []string{"usage: markov", "-o text|json"}, emptyError: true},
		{name: "--help", args: []string{"--help"}, code: ExitOK, stdout: []string{"usage: markov", "\n  version "}, emptyError: true},
		{name: "help resume", args: []string{"help", "resume"}, code: ExitOK, stdout: []string{"usage: markov resume [--error] [--text] [--fresh-turn] [-o text|json] <suspend-id> <payload>", "-error", "-fresh-turn", "-text", "-db", "-o format"}, emptyError: true},
		{name: "resume -h", args: []string{"resume", "-h"}, code: ExitOK, stdout: []string{"usage: markov resume", "-error"}, emptyError: true},
		{name: "invoke --help", args: []string{"invoke", "--help"}, code: ExitOK, stdout: []string{"usage: markov invoke [--instance ID] [-o text|json] <machine-id> <command> [input-json]", "-instance"}, emptyError: true},
		{name: "help create", args: []string{"help", "create"}, code: ExitOK, stdout: []string{"usage: markov create", "-state"}, emptyError: true},
		{name: "version -h", args: []string{"version", "-h"}, code: ExitOK, stdout: []string{"usage: markov version [-o text|json]"}, emptyError: true},
		{name: "help unknown", args: []string{"help", "nope"}, code: ExitUsage, stderr: []string{`unknown command "nope"`}, noStdout: true},
		{name: "bad output format", args: []string{"pending", "-o", "yaml"}, code: ExitUsage, stderr: []string{`markov pending: invalid value "yaml" for flag -o: unknown output format "yaml" (want text or json)`, "usage: markov pending"}, noStdout: true},
		{name: "version takes no argument", args: []string{"version", "x"}, code: ExitUsage, stderr: []string{`markov version: unexpected argument "x"`}, noStdout: true},
		{name: "create wants a node", args: []string{"create"}, code: ExitUsage, stderr: []string{"markov create: want a node name, got 0 arguments"}, noStdout: true},
		{name: "create state not JSON", args: []string{"create", "--state", "{x", "support"}, code: ExitUsage, stderr: []string{`state "{x" is not valid JSON`}, noStdout: true},
		{name: "invoke wants a command", args: []string{"invoke", "m_1"}, code: ExitUsage, stderr: []string{"markov invoke: want a machine ID, a command and an optional JSON input, got 1 arguments"}, noStdout: true},
		{name: "invoke input not JSON", args: []string{"invoke", "m_1", "note", "{x"}, code: ExitUsage, stderr: []string{`input "{x" is not valid JSON`}, noStdout: true},
		{name: "bad flag", args: []string{"pending", "--nope"}, code: ExitUsage, stderr: []string{"markov pending: flag provided but not defined: -nope", "usage: markov pending", "Run 'markov pending -h' for details."}},
		{name: "bad global flag", args: []string{"--nope", "pending"}, code: ExitUsage, stderr: []string{"markov: flag provided but not defined: -nope"}},
		{name: "resume wants two arguments", args: []string{"resume", "x"}, code: ExitUsage, stderr: []string{"markov resume: want a suspend ID and a payload, got 1 arguments"}},
		{name: "resume payload not JSON", args: []string{"resume", "x", "{nope"}, code: ExitUsage, stderr: []string{`payload "{nope" is not valid JSON`}},
		{name: "cancel wants an ID", args: []string{"cancel"}, code: ExitUsage, stderr: []string{"markov cancel: want a suspend ID"}},
		{name: "graph bad format", args: []string{"graph", "--format", "png"}, code: ExitUsage, stderr: []string{`unknown format "png"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, charter, tt.args...)
			require.Equal(t, tt.code, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			for _, s := range tt.stdout {
				require.Contains(t, res.stdout, s)
			}
			for _, s := range tt.stderr {
				require.Contains(t, res.stderr, s)
			}
			if tt.noStdout {
				require.Empty(t, res.stdout)
			}
			if tt.emptyError {
				require.Empty(t, res.stderr)
			}
		})
	}
}

func TestMissingDatabase(t *testing.T) {
	charter := refundCharter(t)
	path := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{
		{"pending", "--db", path},
		{"inspect", "--db", path, "m_1"},
		{"resume", "--db", path, "ID", `{}`},
		{"cancel", "--db", path, "ID"},
	} {
		res := run(t, charter, args...)
		require.Equal(t, ExitError, res.code, "%v", args)
		require.Contains(t, res.stderr, "markov: database "+path+" does not exist")
		require.NoFileExists(t, path, "a read command must not create the database")
	}
}

func TestPending(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)

	res := run(t, charter, "pending", "--db", db)
	require.Equal(t, ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 4, res.stdout)
	require.Regexp(t, `^SUSPEND ID\s+MACHINE\s+CALL\s+REASON\s+DEADLINE$`, lines[0])
	require.Regexp(t, `^`+suspendID+`\s+`+machineID+`\s+tool request_refund\s+refund of \$89\.90 for order A-1042 needs a manager's approval\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in 4[78]h`, lines[1])
	// The payload a resume must send, from the refund tool's Approval.
	require.Equal(t, "resume payloads must match:", lines[2])
	require.Equal(t, "  "+suspendID+": "+approvalSchema, lines[3])

	// The global --db works too, and --db after the flags. The time left
	// to the deadline may have ticked between the two runs.
	require.Equal(t, withoutTimeLeft(res.stdout), withoutTimeLeft(run(t, charter, "--db", db, "pending").stdout))

	res = run(t, charter, "pending", "--db", db, "--json")
	require.Equal(t, ExitOK, res.code, res.stderr)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &list))
	require.Len(t, list, 1)
	schema, err := json.Marshal(list[0]["payload_schema"])
	require.NoError(t, err)
	require.JSONEq(t, approvalSchema, string(schema))
	require.Equal(t, suspendID, list[0]["suspend_id"])
	require.Equal(t, machineID, list[0]["machine_id"])
	require.Equal(t, "request_refund", list[0]["name"])
	require.NotEmpty(t, list[0]["deadline"])
	require.Equal(t, res.stdout, run(t, charter, "pending", "--db", db, "-o", "json").stdout, "--json is -o json")

	res = run(t, charter, "pending", "--db", db, "--machine", "m_other")
	require.Equal(t, "no pending suspensions in "+db+"\n", res.stdout)
	res = run(t, charter, "pending", "--db", db, "--expired")
	require.Equal(t, "no pending suspensions in "+db+"\n", res.stdout)

	// Other statuses: a bad one is a usage error; a cancelled call is
	// listed as cancelled, and no longer as pending.
	res = run(t, charter, "pending", "--db", db, "--status", "canceled")
	require.Equal(t, ExitUsage, res.code)
	require.Contains(t, res.stderr, `markov pending: --status "canceled": want pending, resolved, expired or cancelled`)
	res = run(t, charter, "pending", "--db", db, "--status", "cancelled")
	require.Equal(t, "no cancelled suspensions in "+db+"\n", res.stdout)
	res = run(t, charter, "cancel", "--db", db, suspendID, "not needed")
	require.Equal(t, ExitOK, res.code, res.stderr)
	res = run(t, charter, "pending", "--db", db, "--status", "cancelled", "-o", "json")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &list))
	require.Len(t, list, 1)
	require.Equal(t, suspendID, list[0]["suspend_id"])
	require.Equal(t, "cancelled", list[0]["status"])
	res = run(t, charter, "pending", "--db", db)
	require.Equal(t, "no pending suspensions in "+db+"\n", res.stdout)
}

func TestInspect(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)

	res := run(t, charter, "inspect", "--db", db, machineID)
	require.Equal(t, ExitOK, res.code, res.stderr)
	for _, want := range []string{
		"machine " + machineID + ` (charter "refunds", revision 3)`,
		"tree:\n  support (",
		") [suspended: 1 pending]\n    state: {\"refunded\":null}\n",
		"    suspension " + suspendID + ": pending tool request_refund, deadline ",
		"pending: 1\n  pending tool call\n    suspend ID: " + suspendID,
		"    payload:    " + approvalSchema + "\n",
		"history: 1 messages\n  user: " + refund.CustomerRequest + "\n",
	} {
		require.Contains(t, res.stdout, want)
	}

	// Resolve it, then look at the last message only.
	require.Equal(t, ExitOK, run(t, charter, "resume", "--db", db, suspendID, `{"approved":true,"manager":"dana"}`).code)
	res = run(t, charter, "inspect", "--db", db, "-n", "1", machineID)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "[idle]\n    state: {\"refunded\":[\"A-1042\"]}\n")
	require.Contains(t, res.stdout, "pending: none\n")
	require.True(t, strings.HasSuffix(res.stdout, "history: 4 messages, the last 1:\n  assistant: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.\n"), res.stdout)

	res = run(t, charter, "inspect", "--db", db, "--json", machineID)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.True(t, json.Valid([]byte(res.stdout)), res.stdout)
	require.Contains(t, res.stdout, "A-1042")

	// Without an ID: the machines.
	other, _ := park(t, charter, db)
	res = run(t, charter, "inspect", "--db", db)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "machines in "+db+":\n")
	require.Contains(t, res.stdout, "  "+machineID+"\n")
	require.Contains(t, res.stdout, "  "+other+"\n")

	res = run(t, charter, "inspect", "--db", db, "m_nope")
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "markov: no machine m_nope in "+db+" (list them with 'markov inspect')")
}

func TestResume(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)

	// Flags may follow the arguments.
	res := run(t, charter, "resume", suspendID, `{"approved":true,"manager":"dana@example.com"}`, "--db", db)
	require.Equal(t, ExitOK, res.code, res.stderr)
	want := fmt.Sprintf(`model: test model
resuming suspension %[1]s of machine %[2]s (tool request_refund: refund of $89.90 for order A-1042 needs a manager's approval)
[step: end_turn, done: true]
suspension %[1]s resumed (tool request_refund)
assistant: I'm sorry about the blender. I'll ask a manager to approve the refund.
assistant calls request_refund {"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}
tool result: refund of $89.90 for order A-1042 issued, approved by dana@example.com
assistant: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana@example.com.
machine %[2]s saved at revision 5
final answer: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana@example.com.
`, suspendID, machineID)
	require.Equal(t, want, res.stdout)
	require.Empty(t, res.stderr)

	// A second resume is refused and changes nothing.
	res = run(t, charter, "resume", "--db", db, suspendID, `{"approved":false,"manager":"sam"}`)
	require.Equal(t, ExitError, res.code)
	require.Equal(t, "markov: suspension "+suspendID+" of machine "+machineID+" is resolved, not pending; nothing changed: instance: suspension already resolved\n", res.stderr)
	require.Empty(t, res.stdout)
	require.Contains(t, run(t, charter, "inspect", "--db", db, machineID).stdout, "revision 5)")

	res = run(t, charter, "resume", "--db", db, "NOSUCHID", `{}`)
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "markov: no suspension NOSUCHID in "+db+" (list the pending ones with 'markov pending')")
}

// approvalSchema is the payload schema of the refund tool (refund.Approval).
const approvalSchema = `{"type":"object","properties":{"approved":{"type":"boolean","description":"true to issue the refund, false to decline it"},"manager":{"type":"string","description":"who decided"}},"required":["approved","manager"],"additionalProperties":false}`

// A payload that is not an Approval exits non-zero with the violation and
// leaves the stored machine byte-identical and its suspension pending.
func TestResumeRejectsBadPayload(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)
	stored := func() *store.Snapshot {
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db})
		require.NoError(t, err)
		defer st.Close()
		snap, err := st.Load(context.Background(), machineID)
		require.NoError(t, err)
		return snap
	}
	before := stored()
	for payload, violation := range map[string]string{
		`{"approved":"yes","manager":"dana"}`: "payload: approved: expected boolean, got string",
		`{"approved":true}`:                   "payload: manager: required",
		`"yes"`:                               "payload: expected object, got string",
	} {
		res := run(t, charter, "resume", "--db", db, suspendID, payload)
		require.Equal(t, ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "suspension "+suspendID+": "+violation)
		require.NotContains(t, res.stdout, "resuming suspension", "refused before anything runs")
		require.Contains(t, res.stderr, "nothing changed, the suspension is still pending")
		require.Equal(t, before, stored(), "the stored machine is byte-identical")
	}
	res := run(t, charter, "pending", "--db", db)
	require.Contains(t, res.stdout, suspendID)

	res = run(t, charter, "resume", "--db", db, suspendID, `{"approved":true,"manager":"dana"}`)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "final answer: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.\n")
}

func TestResumeDeclined(t *testing.T) {
	charter := refundCharter(t)
	db, _, suspendID := parked(t, charter)
	res := run(t, charter, "resume", "--db", db, suspendID, `{"approved":false,"manager":"sam"}`)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "final answer: Update on your refund: sam declined the refund for order A-1042.\n")
}

func TestResumeAsError(t *testing.T) {
	// A plain charter whose tool takes the payload as its result.
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != message.Tool {
			return scripted.Tool("wait", struct{}{}), nil
		}
		p := last.Parts[0]
		return scripted.Text(fmt.Sprintf("error=%v text=%s", p.IsError, p.Text)), nil
	})
	charter := waitCharter(t, model, 0)
	db := filepath.Join(t.TempDir(), "test.db")
	ids := parkWaiter(t, charter, db, 2)

	res := run(t, charter, "resume", "--db", db, "--error", "--text", ids[0], "the CI job crashed")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "final answer: error=true text=the CI job crashed\n")

	// A JSON string is passed as its text.
	res = run(t, charter, "resume", "--db", db, ids[1], `"green"`)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "final answer: error=false text=green\n")
}

func TestCancel(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)
	res := run(t, charter, "cancel", "--db", db, suspendID, "customer", "withdrew")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "cancelling suspension "+suspendID+" of machine "+machineID)
	require.Contains(t, res.stdout, "suspension "+suspendID+" cancelled (tool request_refund)\n")
	require.Contains(t, res.stdout, "tool error: cancelled: customer withdrew\n")
	require.Contains(t, res.stdout, "final answer: Sorry, I couldn't get your refund approved: cancelled: customer withdrew. I've passed it on to a human colleague.\n")
	require.Equal(t, "no pending suspensions in "+db+"\n", run(t, charter, "pending", "--db", db).stdout)

	// The default reason.
	_, second := park(t, charter, db)
	res = run(t, charter, "cancel", "--db", db, second)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "tool error: cancelled: cancelled from the command line\n")
}

func TestGraph(t *testing.T) {
	charter := refundCharter(t)
	want, err := charter.Graph(machine.GraphMermaid)
	require.NoError(t, err)
	res := run(t, charter, "graph")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Equal(t, strings.TrimSuffix(want, "\n")+"\n", res.stdout)
	require.Contains(t, res.stdout, "support")

	res = run(t, charter, "graph", "--format", "graphviz")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "digraph")
}

func TestServeNeedsASecret(t *testing.T) {
	charter := refundCharter(t)
	db := filepath.Join(t.TempDir(), "test.db")
	c := &CLI{Charter: charter, Getenv: func(string) string { return "" }, Stderr: io.Discard}
	err := c.Run(context.Background(), []string{"serve", "--db", db})
	require.ErrorContains(t, err, "$MARKOV_SECRET is not set")

	for _, weak := range []string{"short", strings.Repeat(" ", 16), strings.Repeat("a", 64)} {
		c = &CLI{Charter: charter, Getenv: func(k string) string { return map[string]string{"S": weak}[k] }}
		err = c.Run(context.Background(), []string{"serve", "--db", db, "--secret-env", "S"})
		require.ErrorIs(t, err, resumehttp.ErrWeakSecret)
		require.ErrorContains(t, err, "$S: ")
	}
}

func TestServe(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)
	otherMachineID, otherSuspendID := park(t, charter, db)
	secret := []byte("0123456789abcdef-0123456789abcdef-test-secret")

	var out, errb syncBuffer
	addrs := make(chan net.Addr, 1)
	c := &CLI{
		Charter: charter, Model: "test model", Stdout: &out, Stderr: &errb,
		Getenv:   func(k string) string { return map[string]string{"TEST_SECRET": string(secret)}[k] },
		onListen: func(a net.Addr) { addrs <- a },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- c.Run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--secret-env", "TEST_SECRET", "--sweep", "10ms", "--idle-timeout", "100ms"})
	}()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("serve ended early: %v\n%s", err, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not listen")
	}

	// The probes need no signature.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + addr.String() + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}

	// An unsigned request is refused.
	resp, err := http.Post("http://"+addr.String()+"/suspensions/"+suspendID+"/resume", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// A signed one is accepted: 202, and where to follow the machine,
	// whose run goes on.
	body := []byte(`{"payload":{"approved":true,"manager":"dana"}}`)
	resp = signedResume(t, secret, addr.String(), otherSuspendID, body, "")
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var acc resumehttp.Acceptance
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&acc))
	resp.Body.Close()
	require.Equal(t, otherMachineID, acc.MachineID)
	require.Equal(t, "/machines/"+otherMachineID, acc.Location)
	require.Equal(t, acc.Location, resp.Header.Get("Location"))

	// A client that waits gets the run's summary.
	resp = signedResume(t, secret, addr.String(), suspendID, body, "wait=30")
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var sum resumehttp.Summary
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&sum))
	require.Equal(t, machineID, sum.MachineID)
	require.True(t, sum.Done)
	require.Empty(t, sum.Pending)
	require.Equal(t, "Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.", sum.Text)

	// The server closes an idle keep-alive connection after --idle-timeout.
	conn, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr.String()+"/suspensions", nil)
	require.NoError(t, err)
	resumehttp.SignRequest(secret, req, nil, time.Now())
	require.NoError(t, req.Write(conn))
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, br)
	require.NoError(t, err, "the idle connection was not closed")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	stdout := out.String()
	require.Contains(t, stdout, "model: test model\n")
	require.Contains(t, stdout, "serving the machines of "+db+" on http://"+addr.String()+" (requests signed with $TEST_SECRET)\n")
	require.Contains(t, stdout, "sweeping expired suspensions every 10ms\n")
	require.True(t, strings.HasSuffix(stdout, "shutting down\nstopped\n"), stdout)
	require.Contains(t, errb.String(), "level=", "serve logs to stderr")
	res := run(t, charter, "pending", "--db", db)
	require.Equal(t, "no pending suspensions in "+db+"\n", res.stdout, "the accepted resume was applied")
}

// signedResume posts a signed resume of suspendID with body to the server
// at addr, with a Prefer header unless prefer is empty.
func signedResume(t *testing.T, secret []byte, addr, suspendID string, body []byte, prefer string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/suspensions/"+suspendID+"/resume", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if prefer != "" {
		req.Header.Set("Prefer", prefer)
	}
	resumehttp.SignRequest(secret, req, body, time.Now())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// waitCharter is a charter whose "wait" tool suspends with a timeout (none
// if zero) and takes the payload as its result.
func waitCharter(t *testing.T, model llm.Model, timeout time.Duration) *machine.Charter {
	t.Helper()
	type empty struct{}
	wait := node.NewTool("wait", "Wait for an external result.",
		func(ctx *node.ToolContext[empty], _ struct{}) (string, error) {
			var opts []instance.SuspendOption
			if timeout > 0 {
				opts = append(opts, instance.WithTimeout(timeout))
			}
			return "", ctx.Suspend("waiting for CI", opts...)
		})
	n, err := node.New("waiter", node.Config[empty]{Tools: []node.Tool[empty]{wait}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Name: "waits", Model: model, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	return c
}

// parkWaiter adds n machines of waitCharter suspended on "wait" and
// returns their suspend IDs.
func parkWaiter(t *testing.T, charter *machine.Charter, path string, n int) []string {
	t.Helper()
	_, ids := parkAll(t, charter, path, "waiter", "run CI", n)
	return ids
}

func TestServeSweepsExpiredSuspensions(t *testing.T) {
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if req.Messages[len(req.Messages)-1].Role != message.Tool {
			return scripted.Tool("wait", struct{}{}), nil
		}
		return scripted.Text("CI timed out"), nil
	})
	charter := waitCharter(t, model, time.Millisecond)
	db := filepath.Join(t.TempDir(), "test.db")
	parkWaiter(t, charter, db, 1)
	require.Contains(t, run(t, charter, "pending", "--db", db, "--expired").stdout, "tool wait")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	c := &CLI{Charter: charter, Getenv: func(string) string { return "0123456789abcdef-0123456789abcdef" }, Stderr: io.Discard}
	go func() { done <- c.Run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--sweep", "5ms"}) }()
	require.Eventually(t, func() bool {
		return run(t, charter, "pending", "--db", db).stdout == "no pending suspensions in "+db+"\n"
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// serve continues, at its start, a run cut short by a stop after its
// input was accepted: here the resume was saved and the model call after
// it never answered before the process stopped.
func TestServeContinuesARunCutShort(t *testing.T) {
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if req.Messages[len(req.Messages)-1].Role != message.Tool {
			return scripted.Tool("wait", struct{}{}), nil
		}
		return scripted.Text("CI passed"), nil
	})
	charter := waitCharter(t, model, 0)
	db := filepath.Join(t.TempDir(), "test.db")
	machineIDs, suspendIDs := parkAll(t, charter, db, "waiter", "run CI", 1)

	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	require.NoError(t, err)
	defer st.Close()
	hanging := waitCharter(t, scripted.Func(func(*llm.Request) (scripted.Reply, error) {
		return scripted.Reply{}, context.Canceled // the stop, mid-call
	}), 0)
	stopped, err := durable.New(durable.Config{Store: st, Charter: hanging})
	require.NoError(t, err)
	_, err = stopped.AcceptResume(ctx, machine.ResumeInput{SuspendID: suspendIDs[0], Payload: "green"})
	require.NoError(t, err)
	require.NoError(t, stopped.Wait(ctx))
	watcher, err := durable.New(durable.Config{Store: st, Charter: charter})
	require.NoError(t, err)
	status := func() durable.Status {
		s, err := watcher.Status(ctx, machineIDs[0])
		require.NoError(t, err)
		return s
	}
	require.Equal(t, durable.StateIdle, status().State, "the resume saved, the run cut short")

	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	c := &CLI{Charter: charter, Getenv: func(string) string { return "0123456789abcdef-0123456789abcdef" }, Stderr: io.Discard}
	go func() {
		done <- c.Run(serveCtx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--sweep", "0"})
	}()
	require.Eventually(t, func() bool { return status().State == durable.StateDone }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, "CI passed", status().LastText)
	cancel()
	require.NoError(t, <-done)
}

func TestParsePayload(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		text bool
		want any
	}{
		{`{"a":1}`, false, json.RawMessage(`{"a":1}`)},
		{`"ok"`, false, "ok"},
		{`42`, false, json.RawMessage(`42`)},
		{`not json`, true, "not json"},
		{`"quoted"`, true, `"quoted"`},
	} {
		got, err := parsePayload(tt.arg, tt.text)
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
	_, err := parsePayload("not json", false)
	require.ErrorContains(t, err, "not valid JSON")
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain()) // a child process of process_test.go
	}
	// Hermetic: the commands never pick a real model here, but be sure.
	os.Unsetenv("ANTHROPIC_API_KEY")
	os.Unsetenv("OPENAI_API_KEY")
	os.Exit(m.Run())
}

func TestRunMachine(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)

	// While the refund waits, a message is kept and no model is called.
	res := run(t, charter, "run", "--db", db, machineID, "any", "news?")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "[step: awaiting_resume, done: true]")
	require.Contains(t, res.stdout, "1 call(s) still pending")
	require.Contains(t, res.stdout, suspendID)

	res = run(t, charter, "resume", "--db", db, suspendID, `{"approved":true,"manager":"dana@example.com"}`)
	require.Equal(t, ExitOK, res.code, res.stderr)

	// Nothing left to do: the run ends at once.
	res = run(t, charter, "run", "--db", db, machineID)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "machine "+machineID+" saved at revision")

	res = run(t, charter, "run", "--db", db, "ghost")
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "no machine ghost")
	res = run(t, charter, "run", "--db", db)
	require.Equal(t, ExitUsage, res.code)
}

// pending and inspect open the database read-only: they neither migrate
// an unmigrated file nor wait for the write lock another process holds.
func TestListingWritesNothing(t *testing.T) {
	charter := refundCharter(t)
	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for _, cmd := range []string{"pending", "inspect"} {
		res := run(t, charter, cmd, "--db", empty)
		require.Equal(t, ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "open the database once with write access")
		fi, err := os.Stat(empty)
		require.NoError(t, err)
		require.Zero(t, fi.Size(), "%s wrote to the database", cmd)
	}

	db, machineID, suspendID := parked(t, charter)
	sqldb, err := sql.Open("sqlite", db)
	require.NoError(t, err)
	defer sqldb.Close()
	conn, err := sqldb.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // cleanup
	res := run(t, charter, "pending", "--db", db)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, suspendID)
	res = run(t, charter, "inspect", "--db", db, machineID)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "machine "+machineID)
}

// timeLeft is the "(in 47h59m59s)" a listing puts after a deadline.
var timeLeft = regexp.MustCompile(`\(in [0-9hms.]+\)`)

// withoutTimeLeft is out without the time left to its deadlines, which
// depends on when the listing ran.
func withoutTimeLeft(out string) string { return timeLeft.ReplaceAllString(out, "(in …)") }

// --rules loads standing approvals: a refund the rule matches is decided
// at once, in the rule's name, and never waits; a rule that does not
// compile fails the command, naming the rule and the field.
func TestStandingRules(t *testing.T) {
	charter := refundCharter(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "test.db")
	rules := filepath.Join(dir, "rules.json")
	require.NoError(t, os.WriteFile(rules, []byte(`[{"id": "small-refunds", "tool": "request_refund",
		"cel": "input.amount < 100.0", "max_uses": 5, "payload": {"approved": true, "manager": "the small-refunds rule"}}]`), 0o600))
	res := run(t, charter, "create", "--db", db, "--id", "m1", refund.NodeName)
	require.Equal(t, ExitOK, res.code, res.stderr)
	res = run(t, charter, "run", "--db", db, "--rules", rules, "m1", refund.CustomerRequest)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "approved by the small-refunds rule")
	require.NotContains(t, res.stdout, "still pending")
	res = run(t, charter, "pending", "--db", db)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.NotContains(t, res.stdout, "request_refund")

	require.NoError(t, os.WriteFile(rules, []byte(`[{"id": "small-refunds", "tool": "request_refund", "cel": "input.amount <", "payload": true}]`), 0o600))
	res = run(t, charter, "pending", "--db", db, "--rules", rules)
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "--rules "+rules+": standing: rule small-refunds: cel:")
}
