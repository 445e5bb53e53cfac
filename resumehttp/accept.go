package resumehttp

// This file serves resumes, cancellations and commands through an
// [Acceptor]: 202 Accepted once the input is durable, or the run's
// summary when the client asked to wait (Prefer: wait=N) and the run
// ended in time.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/machine"
)

// DefaultMaxWait is the longest a request waits for its run, whatever its
// Prefer: wait asks, when Config.MaxWait is zero.
const DefaultMaxWait = time.Minute

// Acceptor is what the handler needs to answer resumes, cancellations and
// commands without holding the request for the run: it accepts an input
// durably and lets the run that applies it go on elsewhere. Set it as
// Config.Acceptor: *durable.Runner is one (the run goes on in a goroutine
// of the runner, under the machine's hold), and so is *fleet.Fleet (the
// input is committed with the River job that applies it, in any process
// of the fleet).
type Acceptor interface {
	// AcceptResume accepts the resume in.
	AcceptResume(ctx context.Context, in machine.ResumeInput) (durable.Accepted, error)
	// AcceptCancel accepts the cancellation in.
	AcceptCancel(ctx context.Context, in machine.CancelInput) (durable.Accepted, error)
	// AcceptInvoke accepts the command invocation inv for machineID.
	AcceptInvoke(ctx context.Context, machineID string, inv command.Invocation) (durable.Accepted, error)
	// Await waits for the run that applies a to end and returns its
	// steps; ctx ending stops the wait, not the run.
	Await(ctx context.Context, a durable.Accepted) ([]machine.Step, error)
}

// *durable.Runner accepts inputs itself.
var _ Acceptor = (*durable.Runner)(nil)

// Acceptance is the body of a 202 Accepted answer: the input is durable
// and the run that applies it goes on; GET Location shows the machine.
type Acceptance struct {
	// MachineID is the machine the input is for.
	MachineID string `json:"machine_id"`
	// Location is the path of the machine's status (GET /machines/{id}),
	// also in the Location header.
	Location string `json:"location"`
	// SuspendID is the suspension a resume or cancellation resolves.
	SuspendID string `json:"suspend_id,omitempty"`
	// Command is the accepted command's name.
	Command string `json:"command,omitempty"`
}

// maxPreferWait caps a Prefer: wait value (RFC 9111 delta-seconds are
// capped the same way) before Config.MaxWait applies.
const maxPreferWait = 1 << 31

// preferWait returns the wait=N preference of the Prefer headers of h
// (RFC 7240), in seconds, and whether there is one. A preference named
// more than once counts the first time; names are case-insensitive; the
// value may be quoted; a value that is not a non-negative integer makes
// the preference absent, as RFC 7240 asks of preferences a server cannot
// comply with. Values over 2^31 count as 2^31.
func preferWait(h http.Header) (seconds int64, ok bool) {
	for _, line := range h.Values("Prefer") {
		for _, pref := range splitQuoted(line, ',') {
			// The preference is what comes before its parameters.
			name, value, _ := strings.Cut(splitQuoted(pref, ';')[0], "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			return parseDelta(unquote(strings.TrimSpace(value)))
		}
	}
	return 0, false
}

// splitQuoted splits s at every sep outside a quoted string.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote removes the quotes of a quoted string (no escapes are needed in
// a number).
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// parseDelta parses delta-seconds: digits only, capped at maxPreferWait.
func parseDelta(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxPreferWait { // only a range error is possible
		return maxPreferWait, true
	}
	return n, true
}

// accepted answers a request whose input a was accepted: 202 with an
// Acceptance, or — when the request prefers to wait and the run that
// applies the input ends within min(wait, Config.MaxWait) — 200 with the
// run's Summary. Either answer carries Preference-Applied when the
// handler waited.
func (h *Handler) accepted(w http.ResponseWriter, r *http.Request, a durable.Accepted, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("machine", a.MachineID))
	if secs, ok := preferWait(r.Header); ok && secs > 0 && h.maxWait > 0 {
		wait := min(time.Duration(secs)*time.Second, h.maxWait)
		w.Header().Set("Preference-Applied", "wait="+strconv.FormatInt(int64(wait/time.Second), 10))
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		steps, err := h.acceptor.Await(ctx, a)
		cancel()
		switch {
		case err == nil:
			h.summary(w, r, a.MachineID, steps, attrs...)
			return
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			h.log.LogAttrs(r.Context(), slog.LevelWarn, "resumehttp: the accepted input's run failed",
				append(attrs, slog.String("error", err.Error()))...)
		}
	}
	loc := h.basePath + "/machines/" + url.PathEscape(a.MachineID)
	w.Header().Set("Location", loc)
	h.writeJSON(w, r, http.StatusAccepted, Acceptance{MachineID: a.MachineID, Location: loc, SuspendID: a.SuspendID, Command: a.Command}, attrs...)
}

// Statuser is the optional capability of a [Runner] or an [Acceptor]
// that serves GET /machines/{id}. *durable.Runner reports running,
// awaiting_resume, idle or done; *fleet.Fleet adds parked and the inputs
// queued.
type Statuser interface {
	// Status returns what machineID is doing.
	Status(ctx context.Context, machineID string) (durable.Status, error)
}

// ParkedLister is the optional capability of a [Runner] or an
// [Acceptor] that serves GET /parked: *fleet.Fleet, and *durable.Runner
// (the machines its sweeps parked; 501 on a store that keeps none).
type ParkedLister interface {
	// Parked lists the parked machines, most recent first (at most
	// limit).
	Parked(ctx context.Context, limit int) ([]durable.Parked, error)
}

var _ Statuser = (*durable.Runner)(nil)

// MachineStatus is the answer of GET /machines/{id}.
type MachineStatus struct {
	MachineID string `json:"machine_id"`
	// Status is running, awaiting_resume, idle, done or parked
	// (durable.State).
	Status string `json:"status"`
	// Revision is the stored revision, UpdatedAt when it was saved.
	Revision  int64     `json:"revision"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Pending are the pending suspensions.
	Pending []Suspension `json:"pending"`
	// Messages is the length of the history; LastText the last thing the
	// machine said.
	Messages int    `json:"messages"`
	LastText string `json:"last_text,omitempty"`
	// Queued counts inputs accepted and not applied yet (a fleet).
	Queued int `json:"queued,omitempty"`
	// Errors are a parked machine's errors, oldest first.
	Errors []string `json:"errors,omitempty"`
	// EventSeq is the sequence number of the last entry of the machine's
	// event log when the status was read (durable.Status.EventSeq): GET
	// /machines/{id}/events?after=EventSeq streams what happened since,
	// not the whole log. Absent (0) when the log is empty or the store
	// keeps none.
	EventSeq int64 `json:"event_seq,omitempty"`
}

// ParkedMachine is an entry of GET /parked.
type ParkedMachine struct {
	MachineID string    `json:"machine_id"`
	Job       int64     `json:"job"`
	Kind      string    `json:"kind"`
	Errors    []string  `json:"errors"`
	ParkedAt  time.Time `json:"parked_at,omitzero"`
}

// ParkedList is the answer of GET /parked, most recently parked first.
type ParkedList struct {
	Parked []ParkedMachine `json:"parked"`
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request, s Statuser) {
	st, err := s.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := MachineStatus{
		MachineID: st.MachineID, Status: string(st.State), Revision: st.Revision, UpdatedAt: st.UpdatedAt,
		Pending: make([]Suspension, len(st.Pending)), Messages: st.Messages, LastText: st.LastText,
		Queued: st.Queued, Errors: st.Errors, EventSeq: st.EventSeq,
	}
	for i, p := range st.Pending {
		out.Pending[i] = suspensionOf(p)
	}
	h.writeJSON(w, r, http.StatusOK, out)
}

func (h *Handler) parked(w http.ResponseWriter, r *http.Request, p ParkedLister) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			h.writeError(w, r, http.StatusBadRequest, "bad_request", "limit must be a positive integer")
			return
		}
		limit = n
	}
	list, err := p.Parked(r.Context(), limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.writeJSON(w, r, http.StatusOK, ParkedList{Parked: ParkedMachines(list)})
}

// ParkedMachines returns list as GET /parked answers it (errors never
// null); markov parked -o json prints the same.
func ParkedMachines(list []durable.Parked) []ParkedMachine {
	out := make([]ParkedMachine, len(list))
	for i, m := range list {
		out[i] = ParkedMachine{MachineID: m.MachineID, Job: m.Job, Kind: m.Kind, Errors: m.Errors, ParkedAt: m.At}
		if out[i].Errors == nil {
			out[i].Errors = []string{}
		}
	}
	return out
}
