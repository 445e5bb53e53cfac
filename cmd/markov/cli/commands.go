package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/serialize"
	"github.com/markov-agents/markov/steptext"
	"github.com/markov-agents/markov/store"
)

// runSteps is what a durable run yields.
type runSteps = iter.Seq2[machine.Step, error]

// builtins returns the built-in commands, in usage order.
func builtins() []Command {
	return []Command{
		{Name: "pending", Args: "[--machine ID] [--status pending|resolved|expired|cancelled] [--expired] [-o text|json]", Summary: "list the pending suspensions (or those of another status): ID, machine, call, reason, deadline", Run: Pending},
		{Name: "inspect", Args: "[-n N] [-o text|json] [machine-id]", Summary: "show a machine: tree, states, suspensions, last messages (no ID: list them)", Run: Inspect},
		{Name: "create", Args: "[--id ID] [--state JSON] [-o text|json] <node>", Summary: "create a stored machine whose root runs the charter's node, and print its ID", Run: Create},
		{Name: "run", Args: "[-o text|json] <machine-id> [message...]", Summary: "send a machine a user message (none: continue pending work) and run it", Run: RunMachine},
		{Name: "invoke", Args: "[--instance ID] [-o text|json] <machine-id> <command> [input-json]", Summary: "invoke a command on a stored machine and run it on", Run: Invoke},
		{Name: "resume", Args: "[--error] [--text] [--fresh-turn] [-o text|json] <suspend-id> <payload>", Summary: "resume a suspension with a JSON payload and run its machine on", Run: Resume},
		{Name: "cancel", Args: "[-o text|json] <suspend-id> [reason...]", Summary: "cancel a suspension (the call fails with the reason) and run its machine on", Run: Cancel},
		{Name: "signal", Args: "[--text] [-o text|json] <event> [payload]", Summary: "resume every suspension waiting for a named event with the payload, and run their machines on", Run: Signal},
		{Name: "suspend", Args: "[--mode finish_step|interrupt_immediate|wait_for_completion] [--event NAME] [--timeout D] [--on-timeout ACTION] [--input JSON] [--no-wait] [-o text|json] <machine-id> [reason...]", Summary: "suspend a machine on behalf of the caller and print its handle", Run: Suspend},
		{Name: "watch", Args: "[--after N] [--until-done] [-o text|json] <machine-id>", Summary: "print a machine's events as they happen (from any process): its log, then live text, tool calls, suspensions", Run: Watch},
		{Name: "graph", Args: "[--format mermaid|graphviz]", Summary: "print the charter's node graph (Mermaid or Graphviz)", Run: Graph},
		{Name: "serve", Args: "[--addr HOST:PORT] [--secret-env VAR] [--sweep DURATION] [--workers N] [--shutdown-timeout D] [--max-wait D] [--console [--console-oidc-issuer URL ...]] [--read-timeout D] [--write-timeout D] [--idle-timeout D] [--a2a-push PATH]", Summary: "serve the signed HTTP resume endpoint, and run machines in the background (SQLite: the sweeper; PostgreSQL: fleet workers)", Run: Serve},
		{Name: "worker", Args: "--store postgres://… [--schema S] [--workers N] [--shutdown-timeout D] [--health HOST:PORT]", Summary: "run a fleet's workers on PostgreSQL, with no HTTP API", Run: Worker},
		{Name: "parked", Args: "[-n N] [-o text|json]", Summary: "list the machines parked after their runs kept failing (a fleet's jobs; SQLite's sweeper), with their errors", Run: Parked},
		{Name: "mcp", Args: "[--node NAME] [--http HOST:PORT] [--secret-env VAR] [--state-ttl D] [--sweep D]", Summary: "serve the charter as a Model Context Protocol server on stdin/stdout, or Streamable HTTP (--http)", Run: MCP},
		{Name: "a2a", Args: "[--addr HOST:PORT] [--node NAME] [--url URL] [--sweep D] [--allow-private-push] [--a2a-push PATH]", Summary: "serve the charter as an Agent2Agent (A2A) agent over HTTP: agent card, JSON-RPC and HTTP+JSON", Run: A2A},
		{Name: "acp", Args: "[--node NAME] [--sweep DURATION] [--watch DURATION]", Summary: "serve the charter as an Agent Client Protocol agent on stdin/stdout (point an editor at it)", Run: ACP},
		{Name: "audit", Args: "[--public-key KEY] [-o text|json] verify|export", Summary: "verify the store's hash-chained audit log of decisions (a changed, removed or reordered entry fails), or write it as JSON lines", Run: Audit},
		{Name: "version", Args: "[-o text|json]", Summary: "print the program's version and the Go version it was built with", Run: Version},
	}
}

// Pending lists the pending suspensions of the database, or those of
// another status (--status).
func Pending(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("pending")
	machineID := fs.String("machine", "", "list the suspensions of this machine only")
	status := fs.String("status", string(store.StatusPending), "list the suspensions with this `status`: pending, resolved, expired or cancelled")
	expired := fs.Bool("expired", false, "list only suspensions whose deadline has passed")
	out := OutputFlag(fs)
	_, err := c.ParseArgs(fs, "pending", args, 0, 0, "")
	if err != nil {
		return err
	}
	st, err := store.ParseStatus(*status)
	if err != nil {
		return Usagef("pending", "--status %q: want pending, resolved, expired or cancelled", *status)
	}
	db, err := c.OpenReadOnly(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	now := c.Charter.Now()
	f := store.Filter{MachineID: *machineID, Status: st}
	if *expired {
		f.DeadlineBefore = now.Add(store.TimePrecision) // deadline ≤ now
	}
	list, err := db.Runner.Pending(ctx, f)
	if err != nil {
		return err
	}
	schemas, err := payloadSchemas(ctx, db.Runner, list)
	if err != nil {
		return err
	}
	w := c.Out()
	if *out == FormatJSON {
		entries := make([]Call, len(list))
		for i, sus := range list {
			entries[i] = indexCall(sus, schemas[sus.ID])
		}
		return c.WriteJSON(entries)
	}
	if len(list) == 0 {
		fmt.Fprintf(w, "no %s suspensions in %s\n", st, db.Name)
		return nil
	}
	PrintSuspensions(w, list, now)
	if len(schemas) > 0 {
		fmt.Fprintln(w, "resume payloads must match:")
		for _, s := range list {
			if schema, ok := schemas[s.ID]; ok {
				fmt.Fprintf(w, "  %s: %s\n", s.ID, schema)
			}
		}
	}
	return nil
}

// payloadSchemas returns the payload schemas of the listed suspensions
// that have one, by suspend ID; the index does not hold them, so each
// machine is loaded, once.
func payloadSchemas(ctx context.Context, r *durable.Runner, list []store.Suspension) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	loaded := map[string]bool{}
	for _, s := range list {
		if loaded[s.MachineID] {
			continue
		}
		loaded[s.MachineID] = true
		m, _, err := r.Load(ctx, s.MachineID)
		if err != nil {
			return nil, err
		}
		for _, c := range m.Pending() {
			if len(c.PayloadSchema) > 0 {
				out[c.SuspendID] = c.PayloadSchema
			}
		}
	}
	return out, nil
}

// Inspect shows one machine, or lists the machines without an ID.
func Inspect(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("inspect")
	n := fs.Int("n", 10, "show the last `N` messages of the history (0: none, -1: all)")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "inspect", args, 0, 1, "one machine ID")
	if err != nil {
		return err
	}
	db, err := c.OpenReadOnly(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	w := c.Out()
	if len(pos) == 0 {
		ids, err := db.Runner.Machines(ctx)
		if err != nil {
			return err
		}
		if *out == FormatJSON {
			entries := make([]machineEntry, len(ids))
			for i, id := range ids {
				entries[i].MachineID = id
			}
			return c.WriteJSON(entries)
		}
		if len(ids) == 0 {
			fmt.Fprintf(w, "no machines in %s\n", db.Name)
			return nil
		}
		fmt.Fprintf(w, "machines in %s:\n", db.Name)
		for _, id := range ids {
			fmt.Fprintf(w, "  %s\n", id)
		}
		return nil
	}
	id := pos[0]
	m, rev, err := db.Runner.Load(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no machine %s in %s (list them with '%s inspect')", id, db.Name, c.name())
		}
		return err
	}
	if *out == FormatJSON {
		b, err := serialize.MarshalJSON(m)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", b)
		return nil
	}
	PrintMachine(w, id, rev, m, *n)
	return nil
}

// PrintMachine prints machine id at revision rev: its tree, its pending
// calls and the last n messages of its history (n < 0: all).
func PrintMachine(w io.Writer, id string, rev int64, m *machine.Machine, n int) {
	fmt.Fprintf(w, "machine %s (charter %q, revision %d)\n", id, m.Charter().Name(), rev)
	fmt.Fprintln(w, "tree:")
	steptext.WriteTree(w, m.Root())
	pending := m.Pending()
	if len(pending) == 0 {
		fmt.Fprintln(w, "pending: none")
	} else {
		fmt.Fprintf(w, "pending: %d\n", len(pending))
		for _, call := range pending {
			steptext.WriteCall(steptext.Indent(w, "  "), call)
		}
	}
	h := m.History()
	if n < 0 || n > len(h) {
		n = len(h)
	}
	switch {
	case n == 0:
		fmt.Fprintf(w, "history: %d messages\n", len(h))
	case n == len(h):
		fmt.Fprintf(w, "history: %d messages\n", len(h))
	default:
		fmt.Fprintf(w, "history: %d messages, the last %d:\n", len(h), n)
	}
	for _, msg := range h[len(h)-n:] {
		steptext.WriteMessage(steptext.Indent(w, "  "), msg)
	}
}

// Resume resumes a suspension with a payload and runs its machine on.
func Resume(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("resume")
	isError := fs.Bool("error", false, "resolve the call as a failure (the model sees an error result)")
	text := fs.Bool("text", false, "pass the payload as plain text rather than JSON")
	fresh := fs.Bool("fresh-turn", false, "resume in a fresh turn: the model sees a digest of the earlier transcript instead of all of it")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "resume", args, 2, 2, "a suspend ID and a payload")
	if err != nil {
		return err
	}
	id := pos[0]
	payload, err := parsePayload(pos[1], *text)
	if err != nil {
		return Usagef("resume", "%v", err)
	}
	return c.resolve(ctx, id, "resuming", *out, func(db *DB) (*durable.Run, error) {
		return db.Runner.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: payload, IsError: *isError, FreshTurn: *fresh})
	})
}

// Cancel cancels a suspension and runs its machine on.
func Cancel(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("cancel")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "cancel", args, 1, -1, "a suspend ID and an optional reason")
	if err != nil {
		return err
	}
	id := pos[0]
	reason := strings.Join(pos[1:], " ")
	if reason == "" {
		reason = "cancelled from the command line"
	}
	return c.resolve(ctx, id, "cancelling", *out, func(db *DB) (*durable.Run, error) {
		return db.Runner.Cancel(ctx, machine.CancelInput{SuspendID: id, Reason: reason})
	})
}

// RunMachine sends a stored machine a user message, or continues its
// pending work without one, and prints the steps.
func RunMachine(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("run")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "run", args, 1, -1, "a machine ID and an optional message")
	if err != nil {
		return err
	}
	var inputs []machine.Input
	if text := strings.Join(pos[1:], " "); text != "" {
		inputs = append(inputs, machine.UserText(text))
	}
	return c.runStored(ctx, pos[0], *out, inputs...)
}

// Invoke invokes a command on a stored machine (its primary leaf, or the
// instance --instance names) and runs it on, printing the steps.
func Invoke(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("invoke")
	instanceID := fs.String("instance", "", "the `ID` of the instance to run the command on (default: the primary leaf)")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "invoke", args, 2, 3, "a machine ID, a command and an optional JSON input")
	if err != nil {
		return err
	}
	inv := command.Invocation{Name: pos[1], InstanceID: *instanceID}
	if len(pos) == 3 {
		if !json.Valid([]byte(pos[2])) {
			return Usagef("invoke", "input %q is not valid JSON (quote it for the shell)", pos[2])
		}
		inv.Input = json.RawMessage(pos[2])
	}
	return c.runStored(ctx, pos[0], *out, inv)
}

// runStored runs stored machine id with inputs and reports the run in
// format out.
func (c *CLI) runStored(ctx context.Context, id string, out Format, inputs ...machine.Input) error {
	db, err := c.Open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	if out == FormatText {
		c.PrintModel()
	}
	if err := c.writeRun(ctx, db, id, db.Runner.Run(ctx, id, inputs...), out); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no machine %s in %s (list them with '%s inspect'): %w", id, db.Name, c.name(), err)
		}
		if errors.Is(err, command.ErrUnknownCommand) {
			return fmt.Errorf("%w; nothing changed (the commands a node takes are in its charter)", err)
		}
		return c.explain(err, id, db)
	}
	return nil
}

// Create creates a stored machine whose root runs a node of the charter
// and prints its ID.
func Create(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("create")
	id := fs.String("id", "", "the machine `ID` (default: a random one)")
	state := fs.String("state", "", "the root's initial state as `JSON` (default: the node's initial state)")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "create", args, 1, 1, "a node name")
	if err != nil {
		return err
	}
	nodeName := pos[0]
	var initial any
	if *state != "" {
		if !json.Valid([]byte(*state)) {
			return Usagef("create", "state %q is not valid JSON (quote it for the shell)", *state)
		}
		initial = json.RawMessage(*state)
	}
	if *id != "" {
		if err := store.CheckID(*id); err != nil {
			return Usagef("create", "%v", err)
		}
	}
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	created, err := db.Runner.Create(ctx, *id, nodeName, initial)
	switch {
	case errors.Is(err, executor.ErrUnknownNode):
		return fmt.Errorf("%w (see the charter's nodes with '%s graph')", err, c.name())
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("machine %s already exists in %s: %w", *id, db.Name, err)
	case err != nil:
		return err
	}
	if *out == FormatJSON {
		return c.WriteJSON(machineEntry{MachineID: created, Node: nodeName})
	}
	fmt.Fprintln(c.Out(), created)
	return nil
}

// resolve finds suspension id, checks in what checkIn asks for (a resume,
// a cancellation), prints what it is, runs the run and reports its steps
// in format out.
func (c *CLI) resolve(ctx context.Context, id, verb string, out Format, checkIn func(*DB) (*durable.Run, error)) error {
	db, err := c.Open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	sus, err := db.Runner.Suspension(ctx, id)
	if err != nil {
		return c.explain(err, id, db)
	}
	if sus.Status != store.StatusPending {
		return fmt.Errorf("suspension %s of machine %s is %s, not pending; nothing changed: %w", id, sus.MachineID, sus.Status, instance.ErrAlreadyResolved)
	}
	run, err := checkIn(db)
	if err != nil {
		return c.explain(err, id, db)
	}
	if out == FormatText {
		c.PrintModel()
		what := sus.Kind
		if sus.Name != "" {
			what += " " + sus.Name
		}
		fmt.Fprintf(c.Out(), "%s suspension %s of machine %s (%s: %s)\n", verb, id, sus.MachineID, what, sus.Reason)
	}
	if err := c.writeRun(ctx, db, run.MachineID(), run.Steps(), out); err != nil {
		return c.explain(err, id, db)
	}
	return nil
}

// printOutcome prints the stored revision of machine id and how its run
// ended: the calls still pending, or the final answer.
func (c *CLI) printOutcome(ctx context.Context, db *DB, id string, last machine.Step) error {
	w := c.Out()
	_, rev, err := db.Runner.Load(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "machine %s saved at revision %d", id, rev)
	if last.NeedsResume() {
		fmt.Fprintf(w, "; %d call(s) still pending (resume with '%s resume <suspend-id> <payload>'):\n", len(last.Suspensions), c.name())
		for _, call := range last.Suspensions {
			steptext.WriteCall(w, call)
		}
		return nil
	}
	fmt.Fprintln(w)
	if a := steptext.FinalAnswer(last.Messages); a != "" {
		fmt.Fprintf(w, "final answer: %s\n", a)
	}
	return nil
}

// explain adds a hint to the errors of resolving suspension id.
func (c *CLI) explain(err error, id string, db *DB) error {
	switch {
	case errors.Is(err, instance.ErrUnknownSuspendID):
		return fmt.Errorf("no suspension %s in %s (list the pending ones with '%s pending'): %w", id, db.Name, c.name(), err)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("another process changed the machine first; nothing was saved: %w", err)
	case errors.Is(err, instance.ErrPayloadDecode):
		return fmt.Errorf("%w; nothing changed, the suspension is still pending (see the payload it takes with '%s pending')", err, c.name())
	}
	return err
}

// parsePayload turns the payload argument into a resume payload: text as
// is, a JSON string as its text, other JSON as raw JSON.
func parsePayload(arg string, text bool) (any, error) {
	if text {
		return arg, nil
	}
	if !json.Valid([]byte(arg)) {
		return nil, fmt.Errorf("payload %q is not valid JSON (quote it for the shell, or pass --text for plain text)", arg)
	}
	var s string
	if json.Unmarshal([]byte(arg), &s) == nil {
		return s, nil
	}
	return json.RawMessage(arg), nil
}

// Graph prints the charter's node graph.
func Graph(_ context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("graph")
	format := fs.String("format", "mermaid", "the graph format: mermaid or graphviz")
	_, err := c.ParseArgs(fs, "graph", args, 0, 0, "")
	if err != nil {
		return err
	}
	var g string
	switch *format {
	case "mermaid":
		g, err = c.Charter.Graph(machine.GraphMermaid)
	case "graphviz", "dot":
		g, err = c.Charter.Graph(machine.GraphGraphviz)
	default:
		return Usagef("graph", "unknown format %q (want mermaid or graphviz)", *format)
	}
	if err != nil {
		return err
	}
	fmt.Fprint(c.Out(), g)
	if !strings.HasSuffix(g, "\n") {
		fmt.Fprintln(c.Out())
	}
	return nil
}
