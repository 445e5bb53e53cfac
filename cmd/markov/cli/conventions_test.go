package cli

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/resumehttp"
)

func TestVersion(t *testing.T) {
	charter := refundCharter(t)
	for _, tt := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want VersionInfo
		text string
	}{
		{name: "no build info", ok: false, want: VersionInfo{Program: "myapp", Version: "(devel)"},
			text: "myapp (devel)\nbuilt with "},
		{name: "markov itself", ok: true,
			info: &debug.BuildInfo{GoVersion: "go1.99.0", Main: debug.Module{Path: modulePath, Version: "v1.2.3"}},
			want: VersionInfo{Program: "myapp", Version: "v1.2.3", Go: "go1.99.0"},
			text: "myapp v1.2.3\nbuilt with go1.99.0\n"},
		{name: "an application depending on markov", ok: true,
			info: &debug.BuildInfo{GoVersion: "go1.99.0", Main: debug.Module{Path: "example.com/myapp"},
				Deps: []*debug.Module{{Path: "example.com/other", Version: "v9.0.0"}, {Path: modulePath, Version: "v0.4.0"}}},
			want: VersionInfo{Program: "myapp", Version: "(devel)", Markov: "v0.4.0", Go: "go1.99.0"},
			text: "myapp (devel)\nmarkov module v0.4.0\nbuilt with go1.99.0\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			newCLI := func(out *strings.Builder) *CLI {
				return &CLI{Name: "myapp", Charter: charter, Stdout: out,
					readBuildInfo: func() (*debug.BuildInfo, bool) { return tt.info, tt.ok }}
			}
			var text strings.Builder
			require.Equal(t, ExitOK, newCLI(&text).Main(context.Background(), []string{"version"}))
			if tt.want.Go == "" {
				require.True(t, strings.HasPrefix(text.String(), tt.text), text.String())
				return
			}
			require.Equal(t, tt.text, text.String())
			var js strings.Builder
			require.Equal(t, ExitOK, newCLI(&js).Main(context.Background(), []string{"version", "-o", "json"}))
			var got VersionInfo
			require.NoError(t, json.Unmarshal([]byte(js.String()), &got))
			require.Equal(t, tt.want, got)
		})
	}
}

// noteCharter is a charter of one "notes" node with two commands: "note"
// appends to the state and returns the count, "approve" suspends until
// resumed and returns the payload.
func noteCharter(t *testing.T) *machine.Charter {
	t.Helper()
	type notes struct {
		Notes []string `json:"notes"`
	}
	type noteIn struct {
		Text string `json:"text"`
	}
	note := command.New("note", "Add a note.", func(ctx *command.Context[notes], in noteIn) (int, error) {
		if in.Text == "" {
			return 0, errors.New("empty note")
		}
		var n int
		err := ctx.Update(func(s *notes) { s.Notes = append(s.Notes, in.Text); n = len(s.Notes) })
		return n, err
	})
	approve := command.New("approve", "Wait for an approval.", func(ctx *command.Context[notes], _ struct{}) (string, error) {
		return "", ctx.Suspend("waiting for a human")
	})
	n, err := node.New("notes", node.Config[notes]{Commands: []command.Command[notes]{note, approve}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Name: "notes", Model: scripted.New(), Nodes: []*node.Node{n}})
	require.NoError(t, err)
	return c
}

func TestCreateAndInvoke(t *testing.T) {
	charter := noteCharter(t)
	db := filepath.Join(t.TempDir(), "test.db")

	// create prints the new machine's ID, and nothing else.
	res := run(t, charter, "create", "--db", db, "notes")
	require.Equal(t, ExitOK, res.code, res.stderr)
	id := strings.TrimSuffix(res.stdout, "\n")
	require.Regexp(t, `^m_\S+$`, id)
	res = run(t, charter, "inspect", "--db", db, id)
	require.Contains(t, res.stdout, "state: {\"notes\":null}\n")

	// With an ID, a state and JSON output.
	res = run(t, charter, "create", "--db", db, "--id", "m_given", "--state", `{"notes":["first"]}`, "-o", "json", "notes")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.JSONEq(t, `{"machine_id":"m_given","node":"notes"}`, res.stdout)
	res = run(t, charter, "create", "--db", db, "--id", "m_given", "notes")
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "markov: machine m_given already exists in "+db)
	res = run(t, charter, "create", "--db", db, "nope")
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, `unknown node: "nope" (see the charter's nodes with 'markov graph')`)

	// invoke runs a command and prints its steps and result.
	res = run(t, charter, "invoke", "--db", db, "m_given", "note", `{"text":"second"}`)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "[step: command, done: true]\n")
	require.Contains(t, res.stdout, `command result: {"Name":"note",`)
	require.Contains(t, res.stdout, "machine m_given saved at revision 2\n")

	res = run(t, charter, "invoke", "--db", db, "-o", "json", "m_given", "note", `{"text":"third"}`)
	require.Equal(t, ExitOK, res.code, res.stderr)
	var got RunResult
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Equal(t, "m_given", got.MachineID)
	require.Equal(t, int64(3), got.Revision)
	require.Equal(t, []string{"command"}, got.Steps)
	require.True(t, got.Done)
	require.Empty(t, got.Pending)
	require.Equal(t, "note", got.Command.Name)
	require.JSONEq(t, `3`, string(got.Command.Value))
	require.Contains(t, run(t, charter, "inspect", "--db", db, "m_given").stdout, `state: {"notes":["first","second","third"]}`)

	// A command that fails, or does not exist, changes nothing.
	before := run(t, charter, "inspect", "--db", db, "-o", "json", "m_given").stdout
	res = run(t, charter, "invoke", "--db", db, "m_given", "note", `{"text":""}`)
	require.Equal(t, ExitError, res.code, res.stdout)
	require.Contains(t, res.stderr, "empty note")
	res = run(t, charter, "invoke", "--db", db, "m_given", "frobnicate")
	require.Equal(t, ExitError, res.code, res.stdout)
	require.Contains(t, res.stderr, `unknown command: "frobnicate" on node notes; nothing changed`)
	require.Equal(t, before, run(t, charter, "inspect", "--db", db, "-o", "json", "m_given").stdout)
	res = run(t, charter, "invoke", "--db", db, "m_ghost", "note", `{"text":"x"}`)
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "no machine m_ghost in "+db)

	// A command that suspends names the command that resumes it, and
	// resume completes it.
	res = run(t, charter, "invoke", "--db", db, "-o", "json", "m_given", "approve")
	require.Equal(t, ExitOK, res.code, res.stderr)
	got = RunResult{}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Len(t, got.Pending, 1)
	call := got.Pending[0]
	require.Equal(t, "command", call.Kind)
	require.Equal(t, "approve", call.Name)
	require.Equal(t, "m_given", call.MachineID)
	require.Equal(t, call.SuspendID, got.Command.SuspendID)
	require.Nil(t, got.Command.Value)

	res = run(t, charter, "pending", "--db", db, "-o", "json")
	var list []Call
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &list))
	require.Len(t, list, 1)
	require.Equal(t, call.SuspendID, list[0].SuspendID)

	res = run(t, charter, "resume", "--db", db, "-o", "json", call.SuspendID, `"ok"`)
	require.Equal(t, ExitOK, res.code, res.stderr)
	got = RunResult{}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.True(t, got.Done)
	require.Empty(t, got.Pending)
	require.Equal(t, &resumehttp.CommandResult{Name: "approve", InstanceID: call.InstanceID, Value: json.RawMessage(`"ok"`)}, got.Command)
}

// A custom CLI's hints name the program and commands it has.
func TestHintsNameTheProgram(t *testing.T) {
	charter := noteCharter(t)
	db := filepath.Join(t.TempDir(), "test.db")
	var out, errb strings.Builder
	c := &CLI{Name: "notes", Charter: charter, Stdout: &out, Stderr: &errb}
	require.Equal(t, ExitError, c.Main(context.Background(), []string{"pending", "--db", db}))
	require.Equal(t, "notes: database "+db+" does not exist (pass --db FILE, or create a machine in it with 'notes create --db "+db+" <node>')\n", errb.String())

	// The hint works: create exists and makes the database.
	out.Reset()
	c = &CLI{Name: "notes", Charter: charter, Stdout: &out, Stderr: &errb}
	require.Equal(t, ExitOK, c.Main(context.Background(), []string{"create", "--db", db, "notes"}))
	id := strings.TrimSpace(out.String())

	out.Reset()
	c = &CLI{Name: "notes", Charter: charter, Stdout: &out, Stderr: &errb}
	require.Equal(t, ExitOK, c.Main(context.Background(), []string{"invoke", "--db", db, id, "approve"}))
	require.Contains(t, out.String(), "1 call(s) still pending (resume with 'notes resume <suspend-id> <payload>'):\n")
}

func TestListingJSON(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, suspendID := parked(t, charter)

	res := run(t, charter, "inspect", "--db", db, "-o", "json")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.JSONEq(t, `[{"machine_id":"`+machineID+`"}]`, res.stdout)

	// run -o json reports the calls still pending in full.
	res = run(t, charter, "run", "--db", db, "-o", "json", machineID, "any news?")
	require.Equal(t, ExitOK, res.code, res.stderr)
	var got RunResult
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Equal(t, []string{"awaiting_resume"}, got.Steps)
	require.True(t, got.Done)
	require.Len(t, got.Pending, 1)
	require.Equal(t, suspendID, got.Pending[0].SuspendID)
	require.JSONEq(t, approvalSchema, string(got.Pending[0].PayloadSchema))
	require.JSONEq(t, `{"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}`, string(got.Pending[0].Input))
	require.NotEmpty(t, got.Pending[0].Deadline)

	// A second machine, cancelled.
	_, second := park(t, charter, db)
	res = run(t, charter, "cancel", "--db", db, "-o", "json", second)
	require.Equal(t, ExitOK, res.code, res.stderr)
	got = RunResult{}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Empty(t, got.Pending, res.stdout)
	require.Contains(t, got.FinalAnswer, "cancelled from the command line")
}
