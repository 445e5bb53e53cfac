package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/steptext"
	"github.com/markov-agents/markov/store"
)

// noScriptRefresh is how often, in seconds, a machine page whose run goes
// on reloads itself where scripts do not run.
const noScriptRefresh = 2

// inboxLimit caps the suspensions one inbox page lists per status.
const inboxLimit = 500

// Row is one suspension of the inbox.
type Row struct {
	store.Suspension
	Node, InstanceID string
	// Input and Metadata are the call's, as JSON (the text filter
	// searches them); Items and Details the same laid out for people.
	Input, Metadata string
	Items, Details  []item
	// Waiting, Left and Overdue are a pending suspension's: how long it
	// has waited, the time left to its deadline, and whether that passed.
	Waiting, Left string
	Overdue       bool
	// Outcome is a decided one's: what was decided, and by whom.
	Outcome Outcome
}

// inboxData is the inbox page's data.
type inboxData struct {
	Status, Node, Tool, Text string
	Statuses                 []store.Status
	Rows                     []Row
	// Rendered is when the page was made: the live updates ignore the
	// feed's changes from before it.
	Rendered time.Time
}

func (c *Console) inbox(w http.ResponseWriter, r *http.Request, who string) {
	q := r.URL.Query()
	d := inboxData{Status: cmp.Or(q.Get("status"), string(instance.StatusPending)), Node: q.Get("node"),
		Tool: q.Get("tool"), Text: q.Get("q"), Statuses: store.Statuses(), Rendered: c.now()}
	rows, err := c.rows(r.Context(), d)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d.Rows = rows
	c.render(w, r, http.StatusOK, "inbox", page{Title: "Inbox", Live: "inbox", Data: d}, who)
}

// rows lists the suspensions the filter selects: those pending first,
// by deadline (the soonest first, those without one last:
// store.CompareSuspensions), then the decided ones, newest first.
func (c *Console) rows(ctx context.Context, d inboxData) ([]Row, error) {
	var entries []store.Suspension
	for _, st := range store.Statuses() {
		if d.Status != "all" && d.Status != string(st) {
			continue
		}
		got, err := c.runner.Pending(ctx, store.Filter{Status: store.Status(st), Limit: inboxLimit})
		if err != nil {
			return nil, err
		}
		entries = append(entries, got...)
	}
	slices.SortStableFunc(entries, func(a, b store.Suspension) int {
		ap, bp := a.Status == store.StatusPending, b.Status == store.StatusPending
		switch {
		case ap && bp:
			return store.CompareSuspensions(a, b)
		case ap != bp:
			return cmp.Compare(boolRank(bp), boolRank(ap))
		}
		return b.CreatedAt.Compare(a.CreatedAt)
	})
	now := c.now()
	machines := map[string]*machine.Machine{}
	var rows []Row
	for _, e := range entries {
		row := c.row(ctx, machines, e, now)
		if d.matches(row) {
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// row fills in a suspension from its machine (loaded once per page).
func (c *Console) row(ctx context.Context, machines map[string]*machine.Machine, e store.Suspension, now time.Time) Row {
	row := Row{Suspension: e}
	if e.Status == store.StatusPending {
		row.Waiting = since(now, e.CreatedAt)
		if !e.Deadline.IsZero() {
			row.Left, row.Overdue = until(now, e.Deadline), !now.Before(e.Deadline)
		}
	}
	m, ok := machines[e.MachineID]
	if !ok {
		m, _, _ = c.runner.Load(ctx, e.MachineID) // a machine gone since: the index entry alone
		machines[e.MachineID] = m
	}
	if e.Status != store.StatusPending {
		row.Outcome = outcomeOf(e, outcomes(m))
	}
	if m == nil {
		return row
	}
	if in, call := m.Root().FindCall(e.ID); call != nil {
		row.Node, row.InstanceID = in.Node, in.ID
		row.Input, row.Metadata = pretty(call.Input), pretty(call.Metadata)
		_, inputSchema := c.tool(in.Node, call)
		row.Items, row.Details = layout(call.Input, inputSchema), layout(call.Metadata, nil)
	}
	return row
}

func (d inboxData) matches(r Row) bool {
	text := strings.ToLower(d.Text)
	return (d.Node == "" || r.Node == d.Node) && (d.Tool == "" || r.Name == d.Tool) &&
		(text == "" || strings.Contains(strings.ToLower(r.Reason+"\n"+r.Name+"\n"+r.Input+"\n"+r.Metadata+"\n"+r.MachineID), text))
}

// suspensionData is the suspension page's data.
type suspensionData struct {
	Entry     store.Suspension
	Call      *instance.SuspendedCall
	Node      string
	Input     string
	Metadata  string
	Form      Form
	Violation string
	// ViolationAt is the id of the field Violation is about, if any.
	ViolationAt string
	Conflict    string
	Notice      string
	// Outcome is how the suspension was decided, once it was.
	Outcome Outcome
	// Request is what is being decided, in people's words.
	Request *callView
	// Edits are the approvers' edits of the call's input, oldest first
	// (the Request's while it is pending).
	Edits []editView
	// Audit is the audit log's verification, when the console has one.
	Audit *auditStatus
}

// callView is a pending call as the decide page and the machine page lay
// it out: who asked and when, what the tool or command will do with
// which input, the deadline and what happens at it, and who may decide.
type callView struct {
	SuspendID, Reason string
	// Kind and Name are the call's ("tool", "approve_refund");
	// Description is the tool's, from the charter.
	Kind, Name, Description string
	Node                    string
	AskedBy                 string
	Asked                   time.Time
	// Input and Metadata are laid out by the tool's input schema.
	Input, Metadata []item
	// Deadline is zero when there is none; Left the time left, or how
	// long ago it passed (Overdue); AtDeadline what happens then.
	Deadline         time.Time
	Left, AtDeadline string
	Overdue          bool
	Governance       *policyView
	// Edits are the approvers' edits of the call's input, oldest first.
	Edits []editView
}

// request lays pending call of node out for people, at now.
func (c *Console) request(call *instance.SuspendedCall, node string, now time.Time) *callView {
	q := &callView{SuspendID: call.SuspendID, Reason: call.Reason, Kind: string(call.Kind), Name: call.Name, Node: node,
		AskedBy: asker(call, node), Asked: call.SuspendedAt, Deadline: call.Deadline, Governance: governance(call)}
	var inputSchema json.RawMessage
	q.Description, inputSchema = c.tool(node, call)
	q.Input, q.Metadata = layout(call.Input, inputSchema), layout(call.Metadata, nil)
	if !call.Deadline.IsZero() {
		q.Left, q.Overdue = until(now, call.Deadline), !now.Before(call.Deadline)
		q.AtDeadline = onTimeout(call.OnTimeout)
	}
	return q
}

// tool is the description and input schema of the tool call of node
// suspended, from the charter (none for another kind of call).
func (c *Console) tool(node string, call *instance.SuspendedCall) (description string, inputSchema json.RawMessage) {
	if n := c.charter.Node(node); n != nil && call.Kind == instance.KindTool {
		for _, t := range n.Tools() {
			if t.Spec.Name == call.Name {
				return t.Spec.Description, t.Spec.InputSchema
			}
		}
	}
	return "", nil
}

// lookup finds a suspension's index entry and, while it is pending, its
// call and instance.
func (c *Console) lookup(ctx context.Context, id string) (suspensionData, error) {
	e, err := c.runner.Suspension(ctx, id)
	if err != nil {
		return suspensionData{}, err
	}
	d := suspensionData{Entry: e, Audit: c.audit.status(ctx, c.now())}
	m, _, err := c.runner.Load(ctx, e.MachineID)
	if err != nil {
		return d, err
	}
	d.Outcome = outcomeOf(e, outcomes(m))
	d.Edits = edits(m)[id]
	if in, call := m.Root().FindCall(id); call != nil && call.Status == instance.StatusPending {
		d.Call, d.Node = call, in.Node
		d.Input, d.Metadata = pretty(call.Input), pretty(call.Metadata)
		d.Form = newForm(call.PayloadSchema)
		d.Request = c.request(call, in.Node, c.now())
		d.Request.Edits = d.Edits
	}
	return d, nil
}

// found looks up the suspension of the request's path, answering 404 or
// 500 itself when it cannot (ok false).
func (c *Console) found(w http.ResponseWriter, r *http.Request) (d suspensionData, ok bool) {
	d, err := c.lookup(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, instance.ErrUnknownSuspendID):
		http.NotFound(w, r)
	case err != nil:
		c.fail(w, r, err)
	default:
		return d, true
	}
	return d, false
}

func (c *Console) suspensionPage(w http.ResponseWriter, r *http.Request, who string) {
	d, ok := c.found(w, r)
	if !ok {
		return
	}
	// A draft (from signing in again) fills the form in again.
	if draft, err := url.ParseQuery(r.URL.Query().Get("draft")); err == nil && len(draft) > 0 && d.Call != nil {
		d.Form = d.Form.withValues(draft)
		d.Notice = "What you filled in is back; nothing was decided yet."
	}
	c.render(w, r, http.StatusOK, "suspension", page{Title: "Suspension " + d.Entry.ID, Data: d}, who)
}

// machineData is the machine page's data.
type machineData struct {
	ID       string
	Revision int64
	Tree     []TreeRow
	Messages []Line
	// Requests are the pending calls, laid out as the decide page does:
	// what the machine waits for.
	Requests []*callView
	Answer   string
	Graph    string
	// Decided is the suspension the person just decided, from the
	// decide form's redirect; Done the operator's action just taken
	// (retry, cancel), from the machines list's.
	Decided, Done string
	// State is what the machine is doing (durable.State); Stalled says
	// why a run cut short waits, and what continues it.
	State   durable.State
	Queued  int
	Stalled string
	// Audit is the audit log's verification, when the console has one.
	Audit *auditStatus
	// Errors are the failed attempts' of a parked machine; Retry offers
	// to run a stalled or parked machine again.
	Errors []string
	Retry  bool
}

// TreeRow is one instance of the machine page's tree.
type TreeRow struct {
	Depth             int
	Node, ID, Status  string
	State             string
	Leaf, IsSuspended bool
}

// Line is one message of the conversation, as steptext writes it.
type Line struct {
	Role, Text string
}

// snapshotReads is how many times machineSnapshot reads a machine and
// its status at most before it takes two reads that disagree.
const snapshotReads = 3

// machineSnapshot reads machine id and its status. A run that saves
// between the two reads makes them disagree — the page would show one
// revision's conversation under the next one's state (done, without
// the answer that made it done) — so they are read again until they are
// of one revision, snapshotReads times at most.
func (c *Console) machineSnapshot(ctx context.Context, id string) (*machine.Machine, int64, durable.Status, error) {
	for read := 1; ; read++ {
		m, rev, err := c.runner.Load(ctx, id)
		if err != nil {
			return nil, 0, durable.Status{}, err
		}
		st, err := c.statuser.Status(ctx, id)
		if err != nil || st.Revision == rev || read == snapshotReads {
			return m, rev, st, err
		}
	}
}

func (c *Console) machinePage(w http.ResponseWriter, r *http.Request, who string) {
	id := r.PathValue("id")
	m, rev, st, err := c.machineSnapshot(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	root := m.Root()
	d := machineData{ID: id, Revision: rev, Decided: r.URL.Query().Get("decided"), Done: r.URL.Query().Get("done"), Audit: c.audit.status(r.Context(), c.now())}
	edited := edits(m)
	for _, call := range m.Pending() {
		if in, _ := root.FindCall(call.SuspendID); in != nil {
			q := c.request(&call, in.Node, c.now())
			q.Edits = edited[call.SuspendID]
			d.Requests = append(d.Requests, q)
		}
	}
	d.State, d.Queued = st.State, st.Queued
	if st.State == durable.StateIdle && st.Messages > 0 {
		d.Stalled = "The agent's run stopped before its end; it continues when the server next starts or the machine gets its next input."
		if c.runner.Retry().Attempts > 0 {
			d.Stalled = "The agent's last attempt failed; it is tried again shortly."
		}
		if c.fleet != nil {
			d.Stalled = "The agent's last attempt failed; the fleet tries it again shortly."
		}
	}
	parked, err := c.parkedErrors(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if errs, ok := parked[id]; ok || st.State == durable.StateParked {
		d.Stalled = "The agent's run was given up after its last attempt; retry it once the cause is fixed."
		d.Errors = append(errs, st.Errors...)
	}
	d.Retry = d.Stalled != "" && st.State != durable.StateRunning
	current := map[string]bool{}
	d.Tree = treeRows(root, 0, nil, current)
	history := m.History()
	d.Answer = steptext.FinalAnswer(history)
	for _, msg := range history {
		var b bytes.Buffer
		if err := steptext.WriteMessage(&b, msg); err == nil && b.Len() > 0 {
			d.Messages = append(d.Messages, Line{Role: string(msg.Role), Text: strings.TrimRight(b.String(), "\n")})
		}
	}
	if d.Graph, err = c.graph(current); err != nil {
		c.fail(w, r, err)
		return
	}
	p := page{Title: "Machine " + id, Live: id, Data: d}
	if d.State == durable.StateRunning || d.Queued > 0 || (d.Decided != "" && d.State == durable.StateIdle && c.fleet != nil) {
		p.Following = noScriptRefresh // a run goes on: show its end without scripts too
	}
	c.render(w, r, http.StatusOK, "machine", p, who)
}

// treeRows flattens the tree, depth first, noting the leaves' nodes in
// current.
func treeRows(in *instance.Instance, depth int, out []TreeRow, current map[string]bool) []TreeRow {
	row := TreeRow{Depth: depth, Node: in.Node, ID: in.ID, State: pretty(mustJSON(in.State)), Leaf: in.IsLeaf(), IsSuspended: in.Suspended()}
	switch {
	case in.Suspended():
		row.Status = fmt.Sprintf("suspended (%d pending)", in.Suspension.PendingCount())
	case !in.IsLeaf():
		row.Status = "waiting for children"
	case in.Idle:
		row.Status = "idle"
	default:
		row.Status = "active"
	}
	if in.IsLeaf() {
		current[in.Node] = true
	}
	out = append(out, row)
	for _, ch := range in.Children {
		out = treeRows(ch, depth+1, out, current)
	}
	return out
}

// graph is the charter's Mermaid graph with the current nodes marked.
func (c *Console) graph(current map[string]bool) (string, error) {
	g, err := c.charter.Graph(machine.GraphMermaid)
	if err != nil {
		return "", err
	}
	ids := map[string]string{}
	for line := range strings.Lines(g) {
		var name, id string
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "state %q as %s", &name, &id); err == nil {
			ids[name] = id
		}
	}
	var b strings.Builder
	b.WriteString(g)
	b.WriteString("    classDef current fill:#ffd966,stroke:#7f6000,stroke-width:3px\n")
	names := make([]string, 0, len(current))
	for n := range current {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "    class %s current\n", cmp.Or(ids[n], n))
	}
	return b.String(), nil
}

// boolRank is 1 for true, 0 for false.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", fmt.Sprint(v)))
	}
	return b
}

// pretty indents JSON, or returns "" for none.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// since and until say a duration in words a person reads at a glance.
func since(now, t time.Time) string { return short(now.Sub(t)) }

func until(now, t time.Time) string {
	if d := t.Sub(now); d > 0 {
		return short(d)
	}
	return "overdue by " + short(now.Sub(t))
}

func short(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// funcs are the templates' helpers.
var funcs = map[string]any{
	"indent": func(n int) string { return strings.Repeat("\u00a0\u00a0\u00a0\u00a0", n) },
	"optionLabel": func(raw string) string {
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			return s
		}
		return raw
	},
	"ago":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"when":  when,
	"lower": strings.ToLower,
	"list":  func(v ...any) []any { return v },
}
