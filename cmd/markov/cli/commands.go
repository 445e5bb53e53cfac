package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
	"github.com/markov-agents/markov/steptext"
	"github.com/markov-agents/markov/store"
)

// runSteps is what a durable run yields.
type runSteps = iter.Seq2[machine.Step, error]

// builtins returns the built-in commands, in usage order.
func builtins() []Command {
	return []Command{
		{Name: "pending", Args: "[--machine ID] [--expired] [--json]", Summary: "list the pending suspensions: ID, machine, call, reason, deadline", Run: Pending},
		{Name: "inspect", Args: "[-n N] [--json] [machine-id]", Summary: "show a machine: tree, states, suspensions, last messages (no ID: list them)", Run: Inspect},
		{Name: "resume", Args: "[--error] [--text] <suspend-id> <payload>", Summary: "resume a suspension with a JSON payload and run its machine on", Run: Resume},
		{Name: "cancel", Args: "<suspend-id> [reason...]", Summary: "cancel a suspension (the call fails with the reason) and run its machine on", Run: Cancel},
		{Name: "run", Args: "<machine-id> [message...]", Summary: "send a machine a user message (none: continue pending work) and run it", Run: RunMachine},
		{Name: "graph", Args: "[--format mermaid|graphviz]", Summary: "print the charter's node graph (Mermaid or Graphviz)", Run: Graph},
		{Name: "serve", Args: "[--addr HOST:PORT] [--secret-env VAR] [--sweep DURATION] [--read-timeout D] [--write-timeout D] [--idle-timeout D]", Summary: "serve the signed HTTP resume endpoint and sweep expired suspensions", Run: Serve},
	}
}

// Pending lists the pending suspensions of the database.
func Pending(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("pending")
	machineID := fs.String("machine", "", "list the suspensions of this machine only")
	expired := fs.Bool("expired", false, "list only suspensions whose deadline has passed")
	asJSON := fs.Bool("json", false, "print the list as JSON")
	pos, err := c.Parse(fs, "pending", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return Usagef("pending", "unexpected argument %q", pos[0])
	}
	db, err := c.OpenReadOnly(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	now := c.Charter.Now()
	f := store.Filter{MachineID: *machineID}
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
	if *asJSON {
		type entry struct {
			SuspendID     string          `json:"suspend_id"`
			MachineID     string          `json:"machine_id"`
			Kind          string          `json:"kind"`
			Name          string          `json:"name,omitempty"`
			Reason        string          `json:"reason"`
			CreatedAt     string          `json:"created_at,omitempty"`
			Deadline      string          `json:"deadline,omitempty"`
			PayloadSchema json.RawMessage `json:"payload_schema,omitempty"`
		}
		out := make([]entry, len(list))
		for i, s := range list {
			out[i] = entry{SuspendID: s.ID, MachineID: s.MachineID, Kind: s.Kind, Name: s.Name, Reason: s.Reason, PayloadSchema: schemas[s.ID]}
			if !s.CreatedAt.IsZero() {
				out[i].CreatedAt = formatTime(s.CreatedAt)
			}
			if !s.Deadline.IsZero() {
				out[i].Deadline = formatTime(s.Deadline)
			}
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", b)
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintf(w, "no pending suspensions in %s\n", db.Path)
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
	asJSON := fs.Bool("json", false, "print the whole machine in markov's JSON form (serialize.MarshalJSON)")
	pos, err := c.Parse(fs, "inspect", args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return Usagef("inspect", "want one machine ID, got %d arguments", len(pos))
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
		if len(ids) == 0 {
			fmt.Fprintf(w, "no machines in %s\n", db.Path)
			return nil
		}
		fmt.Fprintf(w, "machines in %s:\n", db.Path)
		for _, id := range ids {
			fmt.Fprintf(w, "  %s\n", id)
		}
		return nil
	}
	id := pos[0]
	m, rev, err := db.Runner.Load(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no machine %s in %s (list them with '%s inspect')", id, db.Path, c.name())
		}
		return err
	}
	if *asJSON {
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
	pos, err := c.Parse(fs, "resume", args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return Usagef("resume", "want a suspend ID and a payload, got %d arguments", len(pos))
	}
	id := pos[0]
	payload, err := parsePayload(pos[1], *text)
	if err != nil {
		return Usagef("resume", "%v", err)
	}
	return c.resolve(ctx, id, "resuming", func(db *DB) runSteps {
		return db.Runner.Resume(ctx, id, payload, *isError)
	})
}

// Cancel cancels a suspension and runs its machine on.
func Cancel(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("cancel")
	pos, err := c.Parse(fs, "cancel", args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return Usagef("cancel", "want a suspend ID")
	}
	id := pos[0]
	reason := strings.Join(pos[1:], " ")
	if reason == "" {
		reason = "cancelled from the command line"
	}
	return c.resolve(ctx, id, "cancelling", func(db *DB) runSteps {
		return db.Runner.Cancel(ctx, id, reason)
	})
}

// RunMachine sends a stored machine a user message, or continues its
// pending work without one, and prints the steps.
func RunMachine(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("run")
	pos, err := c.Parse(fs, "run", args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return Usagef("run", "want a machine ID")
	}
	id := pos[0]
	var inputs []machine.Input
	if text := strings.Join(pos[1:], " "); text != "" {
		inputs = append(inputs, machine.UserText(text))
	}
	db, err := c.Open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	c.PrintModel()
	w := c.Out()
	last, err := steptext.WriteAll(w, db.Runner.Run(ctx, id, inputs...))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no machine %s in %s (list them with '%s inspect'): %w", id, db.Path, c.name(), err)
		}
		return c.explain(err, id, db)
	}
	return c.printOutcome(ctx, db, id, last)
}

// resolve finds suspension id, prints what it is, runs its machine with
// run's steps and prints them and how the run ended.
func (c *CLI) resolve(ctx context.Context, id, verb string, run func(*DB) runSteps) error {
	db, err := c.Open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	w := c.Out()
	sus, err := db.Runner.Suspension(ctx, id)
	if err != nil {
		return c.explain(err, id, db)
	}
	if sus.Status != store.StatusPending {
		return fmt.Errorf("suspension %s of machine %s is %s, not pending; nothing changed: %w", id, sus.MachineID, sus.Status, instance.ErrAlreadyResolved)
	}
	c.PrintModel()
	what := sus.Kind
	if sus.Name != "" {
		what += " " + sus.Name
	}
	fmt.Fprintf(w, "%s suspension %s of machine %s (%s: %s)\n", verb, id, sus.MachineID, what, sus.Reason)
	last, err := steptext.WriteAll(w, run(db))
	if err != nil {
		return c.explain(err, id, db)
	}
	return c.printOutcome(ctx, db, sus.MachineID, last)
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
		fmt.Fprintf(w, "; %d call(s) still pending:\n", len(last.Suspensions))
		for _, call := range last.Suspensions {
			steptext.WriteCall(w, call)
		}
		return nil
	}
	fmt.Fprintln(w)
	if a := FinalAnswer(last); a != "" {
		fmt.Fprintf(w, "final answer: %s\n", a)
	}
	return nil
}

// FinalAnswer returns the text of the last assistant message of st, or "".
func FinalAnswer(st machine.Step) string {
	for i := len(st.Messages) - 1; i >= 0; i-- {
		if msg := st.Messages[i]; msg.Role == message.Assistant {
			if t := msg.Text(); t != "" {
				return t
			}
		}
	}
	return ""
}

// explain adds a hint to the errors of resolving suspension id.
func (c *CLI) explain(err error, id string, db *DB) error {
	switch {
	case errors.Is(err, instance.ErrUnknownSuspendID):
		return fmt.Errorf("no suspension %s in %s (list the pending ones with '%s pending'): %w", id, db.Path, c.name(), err)
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
	pos, err := c.Parse(fs, "graph", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return Usagef("graph", "unexpected argument %q", pos[0])
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
