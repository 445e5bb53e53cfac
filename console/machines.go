package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// The machines list's paging: machinesPage machines a page; a search or
// a filter reads at most machinesScan machines (their status each).
const (
	machinesPage = 25
	machinesScan = 2000
	maxPage      = 1 << 20
)

// Machine statuses, as the machines list words durable.State for
// operators.
const (
	statusActive   = "active"   // a run holds it
	statusWaiting  = "waiting"  // for a decision
	statusFinished = "finished" // its last run ended
	statusStalled  = "stalled"  // its last run stopped before its end (failed, or cut short)
	statusNew      = "new"      // never ran
	statusQueued   = "queued"   // an input waits for a fleet's worker
	statusParked   = "parked"   // given up after its last attempt
)

// machineStatuses are the statuses the list filters by, in its order.
var machineStatuses = []string{statusActive, statusQueued, statusWaiting, statusStalled, statusParked, statusFinished, statusNew}

// machineEntry is one machine of the machines list.
type machineEntry struct {
	ID, Status string
	// Nodes are the nodes its current instances run.
	Nodes []string
	// Updated is when it was last saved; Pending how many decisions it
	// waits for; Errors why it is parked or stalled, when known.
	Updated time.Time
	Pending int
	Errors  []string
	// Retry and Cancel say which actions it takes: trying its run again
	// (stalled, parked), cancelling its waits (waiting).
	Retry, Cancel bool
}

// machinesData is the machines page's data.
type machinesData struct {
	Query, Status string
	Statuses      []string
	Rows          []machineEntry
	// Page counts from 1; Prev and Next are the neighbouring pages'
	// links ("" for none); Total the machines matched; Capped that a
	// search stopped after machinesScan machines.
	Page       int
	Prev, Next string
	Total      int
	Capped     bool
	Charter    string
}

func (c *Console) machines(w http.ResponseWriter, r *http.Request, who string) {
	q := r.URL.Query()
	d := machinesData{Query: strings.TrimSpace(q.Get("q")), Status: q.Get("status"), Statuses: machineStatuses, Charter: c.charter.Name()}
	if d.Status != "" && !slices.Contains(machineStatuses, d.Status) {
		d.Status = ""
	}
	d.Page, _ = strconv.Atoi(q.Get("page"))
	d.Page = min(max(d.Page, 1), maxPage) // (page-1)*machinesPage must not overflow
	if err := c.machineRows(r.Context(), &d); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "machines", page{Title: "Machines", Data: d}, who)
}

// machineRows fills d's rows: every machine's ID is listed (sorted);
// without a search or a filter only the page's machines are read, with
// one, up to machinesScan machines are, each read once.
func (c *Console) machineRows(ctx context.Context, d *machinesData) error {
	ids, err := c.runner.Machines(ctx)
	if err != nil {
		return err
	}
	slices.Sort(ids)
	parked, err := c.parkedErrors(ctx)
	if err != nil {
		return err
	}
	text := strings.ToLower(d.Query)
	if d.Query == "" && d.Status == "" {
		d.Total = len(ids)
		lo := min((d.Page-1)*machinesPage, len(ids))
		for _, id := range ids[lo:min(lo+machinesPage, len(ids))] {
			row, err := c.machineRow(ctx, id, parked)
			if err != nil {
				return err
			}
			d.Rows = append(d.Rows, row)
		}
	} else {
		var matched []machineEntry
		for i, id := range ids {
			if i == machinesScan {
				d.Capped = true
				break
			}
			// The ID and the charter's name match without reading.
			byID := text == "" || strings.Contains(strings.ToLower(id), text) || strings.Contains(strings.ToLower(d.Charter), text)
			row, err := c.machineRow(ctx, id, parked)
			if err != nil {
				return err
			}
			if (d.Status == "" || row.Status == d.Status) && (byID || slices.ContainsFunc(row.Nodes, func(n string) bool { return strings.Contains(strings.ToLower(n), text) })) {
				matched = append(matched, row)
			}
		}
		d.Total = len(matched)
		lo := min((d.Page-1)*machinesPage, len(matched))
		d.Rows = matched[lo:min(lo+machinesPage, len(matched))]
	}
	link := func(p int) string {
		v := url.Values{"page": {strconv.Itoa(p)}}
		if d.Query != "" {
			v.Set("q", d.Query)
		}
		if d.Status != "" {
			v.Set("status", d.Status)
		}
		return "?" + v.Encode()
	}
	if d.Page > 1 {
		d.Prev = link(d.Page - 1)
	}
	if d.Page*machinesPage < d.Total {
		d.Next = link(d.Page + 1)
	}
	return nil
}

// parkedErrors are the errors of the machines a sweep or a retry parked,
// by ID (none on a store that keeps no such list; a fleet's Status
// reports its own).
func (c *Console) parkedErrors(ctx context.Context) (map[string][]string, error) {
	list, err := c.runner.Parked(ctx, machinesScan)
	if errors.Is(err, durable.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(list))
	for _, p := range list {
		out[p.MachineID] = p.Errors
	}
	return out, nil
}

// machineRow reads machine id's status and current nodes. A machine
// deleted since it was listed is left out (an empty row's ID).
func (c *Console) machineRow(ctx context.Context, id string, parked map[string][]string) (machineEntry, error) {
	st, err := c.statuser.Status(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return machineEntry{ID: id, Status: statusNew}, nil
	}
	if err != nil {
		return machineEntry{}, err
	}
	row := machineEntry{ID: id, Updated: st.UpdatedAt, Pending: len(st.Pending), Errors: st.Errors}
	switch st.State {
	case durable.StateRunning:
		row.Status = statusActive
	case durable.StateAwaitingResume:
		row.Status = statusWaiting
	case durable.StateDone:
		row.Status = statusFinished
	case durable.StateParked:
		row.Status = statusParked
	default:
		row.Status = statusNew
		if st.Messages > 0 {
			row.Status = statusStalled
		}
	}
	if st.Queued > 0 && row.Status != statusActive && row.Status != statusParked {
		row.Status = statusQueued
	}
	if errs, ok := parked[id]; ok && row.Status != statusActive {
		row.Status, row.Errors = statusParked, errs
	}
	row.Retry = row.Status == statusStalled || row.Status == statusParked
	row.Cancel = row.Pending > 0
	if m, _, err := c.runner.Load(ctx, id); err == nil {
		for in := range m.Root().Leaves() {
			if !slices.Contains(row.Nodes, in.Node) {
				row.Nodes = append(row.Nodes, in.Node)
			}
		}
	}
	return row, nil
}

// machineAction is an operator's action on a machine (POST
// machines/{id}/{action}): retry its run, or cancel its waits. The form
// must carry confirm=yes (its checkbox): an action is never one stray
// click. It answers with the machine's page, or the list with what went
// wrong.
func (c *Console) machineAction(w http.ResponseWriter, r *http.Request, who string) {
	id, action := r.PathValue("id"), r.PathValue("action")
	if action != "retry" && action != "cancel" {
		http.NotFound(w, r)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.actionRefused(w, r, who, http.StatusUnprocessableEntity, "Tick the box to confirm: nothing was done to "+id+".")
		return
	}
	ctx := context.WithoutCancel(r.Context()) // short, and not to be cut in two
	var err error
	switch action {
	case "retry":
		_, err = c.runner.AcceptContinue(ctx, id)
	case "cancel":
		err = c.cancelWaits(ctx, id, who, r.PostFormValue("reason"))
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		http.NotFound(w, r)
	case errors.Is(err, durable.ErrBusy):
		c.actionRefused(w, r, who, http.StatusConflict, "Machine "+id+" is running now; nothing was done. Try again once its run ends.")
	case errors.Is(err, errNothingToCancel):
		c.actionRefused(w, r, who, http.StatusConflict, "Machine "+id+" waits for no decision; nothing was cancelled.")
	case err != nil:
		c.fail(w, r, err)
	default:
		c.log.InfoContext(r.Context(), "markov console: machine action", "machine", id, "action", action, "by", who)
		http.Redirect(w, r, c.prefix+"machines/"+url.PathEscape(id)+"?done="+action, http.StatusSeeOther)
	}
}

// errNothingToCancel: the machine has no pending suspension.
var errNothingToCancel = errors.New("console: nothing to cancel")

// cancelWaits cancels every pending suspension of machine id, as who
// (machine.CancelInput.By: the history and the audit log name them).
func (c *Console) cancelWaits(ctx context.Context, id, who, reason string) error {
	m, _, err := c.runner.Load(ctx, id)
	if err != nil {
		return err
	}
	pending := m.Pending()
	if len(pending) == 0 {
		return errNothingToCancel
	}
	reason = cmp.Or(strings.TrimSpace(reason), "an operator cancelled the machine's waits")
	for _, p := range pending {
		_, err := c.acceptor.AcceptCancel(ctx, machine.CancelInput{SuspendID: p.SuspendID, Reason: reason, By: who})
		if err != nil && !errors.Is(err, instance.ErrAlreadyResolved) {
			return fmt.Errorf("cancel %s: %w", p.SuspendID, err)
		}
	}
	return nil
}

// actionRefused shows the machines list with why an action did nothing.
func (c *Console) actionRefused(w http.ResponseWriter, r *http.Request, who string, status int, msg string) {
	d := machinesData{Statuses: machineStatuses, Page: 1, Charter: c.charter.Name()}
	if err := c.machineRows(r.Context(), &d); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, status, "machines", page{Title: "Machines", Error: msg, Data: d}, who)
}
