package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// appendLine appends line to the file path: the side table the checkpoint
// children share across processes.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(b))
}

type payState struct{}

// payCharter's model calls pay once (tool-use ID from the model, counted
// in calls), then says done; pay records its idempotency key in execs
// and, with killIn, kills its process after recording.
func payCharter(calls, execs string, killIn bool) (*machine.Charter, error) {
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		if err := appendLine(calls, "call"); err != nil {
			return scripted.Reply{}, err
		}
		if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
			return scripted.Text("done"), nil
		}
		return scripted.Tools(scripted.Call{ID: "pay-1", Name: "pay"}), nil
	})
	pay := node.NewTool("pay", "pay the invoice", func(ctx *node.ToolContext[payState], _ struct{}) (string, error) {
		if err := appendLine(execs, ctx.IdempotencyKey()); err != nil {
			return "", err
		}
		if killIn {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return "paid", nil
	})
	n, err := node.New("payer", node.Config[payState]{Tools: []node.Tool[payState]{pay}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
}

// childCheckpoint runs the machine "pay" to its end (creating it with a
// user message when it has no history). MARKOV_KILL=tool kills the
// process inside the tool, after its side effect; MARKOV_KILL=saved kills
// it right after the first tool round is saved.
func childCheckpoint() int {
	kill := os.Getenv("MARKOV_KILL")
	return withRunner(func() (*machine.Charter, error) {
		return payCharter(os.Getenv("MARKOV_CALLS"), os.Getenv("MARKOV_EXECS"), kill == "tool")
	}, func(r *durable.Runner) int { return runPay(r, kill) })
}

// runPay runs the machine "pay" on r, creating it first when it has no
// history, and kills the process after the tool round's save when kill
// is "saved".
func runPay(r *durable.Runner, kill string) int {
	ctx := context.Background()
	var inputs []machine.Input
	if m, _, err := r.Load(ctx, "pay"); err != nil || len(m.History()) == 0 {
		if _, err := r.Create(ctx, "pay", "payer", nil); err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			return 1
		}
		inputs = append(inputs, machine.UserText("pay the invoice"))
	}
	for st, err := range r.Run(ctx, "pay", inputs...) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "run:", err)
			return 1
		}
		if kill == "saved" && st.Reason == machine.ToolUse {
			syscall.Kill(os.Getpid(), syscall.SIGKILL) // saved before yielded
		}
	}
	return 0
}

// runPayChild runs a checkpoint child and reports whether it was killed.
func runPayChild(t *testing.T, db, calls, execs, kill string) bool {
	t.Helper()
	err := childCmd("checkpoint", db, "MARKOV_CALLS="+calls, "MARKOV_EXECS="+execs, "MARKOV_KILL="+kill).Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return true
	}
	require.NoError(t, err)
	return false
}

// paid loads the machine "pay" after its run and returns its root ID and
// the tool-use ID of its one tool exchange, checking the run finished.
func paid(t *testing.T, db string, calls, execs string) (root, toolUse string) {
	t.Helper()
	c, err := payCharter(calls, execs, false)
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: openSQLite(t, db), Charter: c})
	require.NoError(t, err)
	m, _, err := r.Load(context.Background(), "pay")
	require.NoError(t, err)
	h := m.History()
	require.Equal(t, "done", h[len(h)-1].Text())
	for _, msg := range h {
		for _, u := range msg.ToolUses() {
			toolUse = u.ID
		}
	}
	return m.Root().ID, toolUse
}

// A process killed while the tools of a saved reply run: the next process
// continues from the saved reply — the model is called once for that
// round, across both processes — and the tool runs again only with the
// same idempotency key.
func TestCheckpointKilledInTool(t *testing.T) {
	dir := t.TempDir()
	db, calls, execs := filepath.Join(dir, "pay.db"), filepath.Join(dir, "calls"), filepath.Join(dir, "execs")
	require.True(t, runPayChild(t, db, calls, execs, "tool"), "killed inside the tool")
	require.Len(t, readLines(t, calls), 1)
	require.False(t, runPayChild(t, db, calls, execs, ""))

	require.Len(t, readLines(t, calls), 2, "one call for the saved reply, one after the tools: no second call for the reply")
	root, toolUse := paid(t, db, calls, execs)
	require.Equal(t, "pay-1", toolUse, "the tool-use ID of the saved reply")
	key := root + "/" + toolUse
	require.Equal(t, []string{key, key}, readLines(t, execs), "re-executed once, after the kill, with the same key")
}

// A process killed right after its tool round was saved: the next process
// does not run the tool again.
func TestCheckpointKilledAfterSave(t *testing.T) {
	dir := t.TempDir()
	db, calls, execs := filepath.Join(dir, "pay.db"), filepath.Join(dir, "calls"), filepath.Join(dir, "execs")
	require.True(t, runPayChild(t, db, calls, execs, "saved"), "killed after the save")
	require.False(t, runPayChild(t, db, calls, execs, ""))

	require.Len(t, readLines(t, calls), 2)
	root, toolUse := paid(t, db, calls, execs)
	require.Equal(t, []string{root + "/" + toolUse}, readLines(t, execs), "the tool ran once")
}
