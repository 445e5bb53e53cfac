package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/steptext"
	"github.com/markov-agents/markov/store"
)

// Format is an output format, chosen with -o.
type Format string

// The output formats. Text is for people and may change between
// versions; JSON is stable: fields are added, never renamed or removed.
const (
	FormatText Format = "text"
	FormatJSON Format = "json"
)

// String returns the format's name.
func (f *Format) String() string { return string(*f) }

// Set sets the format from its name: text or json.
func (f *Format) Set(s string) error {
	switch Format(s) {
	case FormatText, FormatJSON:
		*f = Format(s)
		return nil
	}
	return fmt.Errorf("unknown output format %q (want text or json)", s)
}

// OutputFlag adds -o FORMAT (text, the default, or json) to fs, and
// --json as a short form of -o json, and returns where the choice is
// stored. A command that shows something takes it.
func OutputFlag(fs *flag.FlagSet) *Format {
	f := FormatText
	fs.Var(&f, "o", "the output `format`: text, or json (stable, for programs)")
	fs.BoolFunc("json", "same as -o json", func(string) error { f = FormatJSON; return nil })
	return &f
}

// WriteJSON writes v to the command output as indented JSON and a
// newline: the -o json form.
func (c *CLI) WriteJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.Out(), "%s\n", b)
	return err
}

// modulePath is the markov module, reported by version when a program
// built around package cli depends on it.
const modulePath = "github.com/markov-agents/markov"

// devel is the version of a module built from a work tree, or unknown.
const devel = "(devel)"

// VersionInfo is what the version command reports (its -o json form).
type VersionInfo struct {
	// Program is the program name (CLI.Name).
	Program string `json:"program"`
	// Version is the main module's version, "(devel)" when it is not
	// known (a build from a work tree).
	Version string `json:"version"`
	// Markov is the version of the markov module when the program is
	// another module that depends on it; absent for markov itself.
	Markov string `json:"markov,omitempty"`
	// Go is the Go version the program was built with.
	Go string `json:"go"`
}

// versionInfo reads the build information of the running program.
func (c *CLI) versionInfo() VersionInfo {
	v := VersionInfo{Program: c.name(), Version: devel, Go: runtime.Version()}
	read := c.readBuildInfo
	if read == nil {
		read = debug.ReadBuildInfo
	}
	bi, ok := read()
	if !ok {
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.Main.Path != modulePath {
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				v.Markov = d.Version
				if d.Replace != nil {
					v.Markov += " => " + d.Replace.Path + " " + d.Replace.Version
				}
			}
		}
	}
	return v
}

// Version prints the program's version, the markov module's when the
// program depends on it, and the Go version it was built with.
func Version(_ context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("version")
	out := OutputFlag(fs)
	_, err := c.ParseArgs(fs, "version", args, 0, 0, "")
	if err != nil {
		return err
	}
	v := c.versionInfo()
	if *out == FormatJSON {
		return c.WriteJSON(v)
	}
	w := c.Out()
	fmt.Fprintf(w, "%s %s\n", v.Program, v.Version)
	if v.Markov != "" {
		fmt.Fprintf(w, "markov module %s\n", v.Markov)
	}
	fmt.Fprintf(w, "built with %s\n", v.Go)
	return nil
}

// Call is the JSON form (-o json) of a suspension: an entry of pending's
// list (of any status), and of a run's Pending.
type Call struct {
	// SuspendID resumes the call (resume, cancel).
	SuspendID string `json:"suspend_id"`
	// MachineID is the machine waiting for the result.
	MachineID string `json:"machine_id"`
	// InstanceID is the suspended instance; set in a run's Pending.
	InstanceID string `json:"instance_id,omitempty"`
	// Status is the index status: pending, resolved, expired or
	// cancelled; set in pending's list.
	Status string `json:"status,omitempty"`
	// Kind is "tool", "command" or "instance".
	Kind string `json:"kind"`
	// Name is the tool or command name.
	Name string `json:"name,omitempty"`
	// Input is the call's input; set in a run's Pending.
	Input json.RawMessage `json:"input,omitempty"`
	// Reason is what the call waits for.
	Reason string `json:"reason"`
	// CreatedAt is when the call suspended (RFC 3339, UTC).
	CreatedAt string `json:"created_at,omitempty"`
	// Deadline is when the call times out (RFC 3339, UTC); absent if
	// never.
	Deadline string `json:"deadline,omitempty"`
	// PayloadSchema is the JSON Schema a resume payload must match, when
	// the call declares one.
	PayloadSchema json.RawMessage `json:"payload_schema,omitempty"`
}

// indexCall returns the JSON form of an index entry with its payload
// schema.
func indexCall(s store.Suspension, schema json.RawMessage) Call {
	return Call{SuspendID: s.ID, MachineID: s.MachineID, Status: string(s.Status), Kind: s.Kind, Name: s.Name, Reason: s.Reason,
		CreatedAt: jsonTime(s.CreatedAt), Deadline: jsonTime(s.Deadline), PayloadSchema: schema}
}

// pendingCall returns the JSON form of a pending call of machine id.
func pendingCall(id string, sc instance.SuspendedCall) Call {
	return Call{SuspendID: sc.SuspendID, MachineID: id, InstanceID: sc.InstanceID, Kind: string(sc.Kind), Name: sc.Name,
		Input: sc.Input, Reason: sc.Reason, CreatedAt: jsonTime(sc.SuspendedAt), Deadline: jsonTime(sc.Deadline),
		PayloadSchema: sc.PayloadSchema}
}

// jsonTime formats t for JSON output, "" when it is zero.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return formatTime(t)
}

// machineEntry is an entry of inspect's list of machines, and what
// create prints (-o json).
type machineEntry struct {
	MachineID string `json:"machine_id"`
	// Node is the root's node; set by create.
	Node string `json:"node,omitempty"`
}

// RunResult is the JSON form (-o json) of what run, invoke, resume and
// cancel did.
type RunResult struct {
	// MachineID is the machine that ran.
	MachineID string `json:"machine_id"`
	// Revision is the machine's stored revision after the run.
	Revision int64 `json:"revision"`
	// Steps are the reasons of the run's steps, in order ("command",
	// "tool_use", "end_turn", "suspend", "awaiting_resume", …).
	Steps []string `json:"steps"`
	// Done reports that the run ended.
	Done bool `json:"done"`
	// Pending are the calls still waiting for a result after the run.
	Pending []Call `json:"pending"`
	// FinalAnswer is the text of the last assistant message of the last
	// step, if any.
	FinalAnswer string `json:"final_answer,omitempty"`
	// Command is the result of the command the run executed (invoke, or
	// a suspended command a resume completed), as the HTTP endpoint
	// reports it.
	Command *resumehttp.CommandResult `json:"command,omitempty"`
}

// writeRun runs steps of machine id and reports them in format out: each
// step as it comes then the outcome (text), or one RunResult (JSON).
func (c *CLI) writeRun(ctx context.Context, db *DB, id string, steps runSteps, out Format) error {
	if out == FormatText {
		last, err := steptext.WriteAll(c.Out(), steps)
		if err != nil {
			return err
		}
		return c.printOutcome(ctx, db, id, last)
	}
	res := RunResult{MachineID: id, Steps: []string{}, Pending: []Call{}}
	var last machine.Step
	for st, err := range steps {
		if err != nil {
			return err
		}
		res.Steps = append(res.Steps, string(st.Reason))
		if st.Command != nil && res.Command == nil {
			res.Command = &resumehttp.CommandResult{Name: st.Command.Name, InstanceID: st.Command.InstanceID}
			if sus := st.Command.Suspension; sus != nil {
				res.Command.SuspendID = sus.SuspendID
			} else if res.Command.Value, err = json.Marshal(st.Command.Value); err != nil {
				return fmt.Errorf("command %s: its result does not encode as JSON: %w", st.Command.Name, err)
			}
		}
		last = st
	}
	_, rev, err := db.Runner.Load(ctx, id)
	if err != nil {
		return err
	}
	res.Revision, res.Done, res.FinalAnswer = rev, last.Done || len(res.Steps) == 0, steptext.FinalAnswer(last.Messages)
	for _, sc := range last.Suspensions {
		res.Pending = append(res.Pending, pendingCall(id, sc))
	}
	return c.WriteJSON(res)
}
