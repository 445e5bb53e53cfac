package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/errtext"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
)

// decision is the input a posted decision form asks for, or a form error.
func decision(d suspensionData, r *http.Request, who string) (machine.Input, error) {
	id := d.Entry.ID
	switch r.PathValue("action") {
	case "resume":
		payload, err := d.Form.decode(r.PostForm)
		if err != nil {
			return nil, err
		}
		return machine.ResumeInput{SuspendID: id, Payload: payload, By: who, Groups: groupsOf(r), Digest: r.PostFormValue("digest"), Edit: editField(r)}, nil
	case "reject":
		// A refusal: the approval's other fields need not be filled in
		// (the button has formnovalidate; decodeReject requires none).
		payload, err := d.Form.decodeReject(r.PostForm)
		if err != nil {
			return nil, err
		}
		return machine.ResumeInput{SuspendID: id, Payload: payload, By: who, Groups: groupsOf(r), Digest: r.PostFormValue("digest"),
			Deny: d.Call.Policy != nil}, nil
	case "error":
		return machine.ResumeInput{SuspendID: id, Payload: cmp.Or(r.PostFormValue("message"), "rejected"), IsError: true, By: who, Groups: groupsOf(r), Digest: r.PostFormValue("digest")}, nil
	case "cancel":
		return machine.CancelInput{SuspendID: id, Reason: r.PostFormValue("reason"), By: who}, nil
	}
	return nil, nil
}

// editField is the edited input a resume form carries (its "_edit"
// field, shown where the policy allows edits), nil when left empty.
func editField(r *http.Request) any {
	if e := strings.TrimSpace(r.PostFormValue(editName)); e != "" {
		return json.RawMessage(e)
	}
	return nil
}

// editName is the resume form's field of an edited input; the leading
// underscore keeps it apart from the payload's fields, as "_decision".
const editName = "_edit"

// decide accepts a decision (resume, error, cancel) as who, the way the
// signed API does (Config.Acceptor: durable once it returns, the run
// that applies it going on elsewhere), and sends the person to the
// machine's page at once, where the run shows as it goes.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, who string) {
	d, ok := c.found(w, r)
	if !ok {
		return
	}
	if d.Call == nil { // no longer pending
		c.conflict(w, r, who, d)
		return
	}
	in, err := decision(d, r, who)
	if err != nil {
		c.rejected(w, r, who, d, err)
		return
	}
	if in == nil {
		http.NotFound(w, r)
		return
	}
	// The acceptance is short; a person closing the page must not cut it
	// in two.
	_, err = c.accept(context.WithoutCancel(r.Context()), in)
	switch {
	case errors.Is(err, instance.ErrPayloadDecode) || errors.Is(err, instance.ErrInvalidInput):
		c.rejected(w, r, who, d, err)
	case errors.Is(err, instance.ErrForbidden) || errors.Is(err, instance.ErrStaleDecision) || errors.Is(err, instance.ErrAlreadyDecided):
		c.refused(w, r, who, d, err)
	case errors.Is(err, instance.ErrAlreadyResolved) || errors.Is(err, store.ErrConflict):
		if fresh, err := c.lookup(r.Context(), d.Entry.ID); err == nil {
			d = fresh
		}
		c.conflict(w, r, who, d)
	case err != nil:
		c.fail(w, r, err)
	default:
		u := c.prefix + "machines/" + url.PathEscape(d.Entry.MachineID) + "?decided=" + url.QueryEscape(d.Entry.ID)
		http.Redirect(w, r, u, http.StatusSeeOther)
	}
}

// accept hands a decision (a resume or a cancellation) to the acceptor.
func (c *Console) accept(ctx context.Context, in machine.Input) (durable.Accepted, error) {
	switch in := in.(type) {
	case machine.ResumeInput:
		return c.acceptor.AcceptResume(ctx, in)
	case machine.CancelInput:
		return c.acceptor.AcceptCancel(ctx, in)
	}
	return durable.Accepted{}, nil
}

// refused tells the person why the suspension's policy refused their
// decision (err: instance.ErrForbidden, ErrStaleDecision or
// ErrAlreadyDecided); nothing changed.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, who string, d suspensionData, err error) {
	status := http.StatusConflict
	switch {
	case errors.Is(err, instance.ErrForbidden):
		status, d.Conflict = http.StatusForbidden, "You may not decide this suspension ("+errtext.ForPerson(err)+"); your decision was not applied."
	case errors.Is(err, instance.ErrStaleDecision):
		d.Conflict = "What is being decided changed since this page was shown; look at it again. Your decision was not applied."
	default:
		d.Conflict = "You decided this suspension already; it waits for other approvers."
	}
	c.render(w, r, status, "suspension", page{Title: "Suspension " + d.Entry.ID, Data: d}, who)
}

// conflict tells the person the suspension was decided already: by them
// (their decision was applied: 200), by someone else, or by a decision
// accepted and not applied yet (409).
func (c *Console) conflict(w http.ResponseWriter, r *http.Request, who string, d suspensionData) {
	status := http.StatusConflict
	switch {
	case d.Outcome.By == who && who != "":
		status, d.Notice = http.StatusOK, "You already decided this suspension; your decision was applied."
	case d.Outcome.By != "":
		d.Conflict = d.Outcome.By + " decided this suspension first; your decision was not applied."
	case d.Entry.Status == store.StatusPending:
		d.Conflict = "A decision on this suspension was already recorded and is being applied; yours was not applied."
	default:
		d.Conflict = "This suspension was decided already; your decision was not applied."
	}
	c.render(w, r, status, "suspension", page{Title: "Suspension " + d.Entry.ID, Data: d}, who)
}

// rejected shows the form again with the posted values and what is
// wrong — a *FieldError of the form, or an *instance.PayloadError of the
// schema — at the field it names, and summed up above the form with a
// link to it; the suspension stays pending.
func (c *Console) rejected(w http.ResponseWriter, r *http.Request, who string, d suspensionData, err error) {
	d.Form = d.Form.withValues(r.PostForm)
	path, msg := "", errtext.ForPerson(err)
	if fe, ok := errors.AsType[*FieldError](err); ok {
		path, msg = fe.Field, fe.Message
	} else if pe, ok := errors.AsType[*instance.PayloadError](err); ok {
		path, msg = pe.Field, pe.Violation
	}
	d.Violation = msg
	if path != "" {
		d.Violation = path + ": " + msg // "tags[1]: expected string, got integer"
	}
	if rest := strings.TrimPrefix(path, fieldOf(path)); rest != "" {
		msg = "at " + rest + ": " + msg // an item of a list, a field of an object
	}
	var at bool
	if d.Form, at = d.Form.withError(path, msg); at {
		d.ViolationAt = "field-" + fieldOf(path)
	}
	c.render(w, r, http.StatusUnprocessableEntity, "suspension", page{Title: "Suspension " + d.Entry.ID, Data: d}, who)
}

// Outcome is how a suspension was decided, for people: Word is
// approved, declined, answered, failed with an error, cancelled or
// expired; By who decided, when a person did (the history's "decided"
// record). The zero Outcome is a suspension still pending.
type Outcome struct {
	Word, By string
}

// outcomes reads, from a machine's history, the outcome of each
// suspension someone decided, by suspend ID.
func outcomes(m *machine.Machine) map[string]Outcome {
	out := map[string]Outcome{}
	if m == nil {
		return out
	}
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.Kind != message.KindRecord || p.Name != "decided" || p.SuspendID == "" {
				continue
			}
			var d machine.DecidedRecord
			if json.Unmarshal(p.Data, &d) == nil {
				out[p.SuspendID] = Outcome{Word: outcomeWord(d), By: d.By}
			}
		}
	}
	return out
}

// outcomeOf is the outcome of suspension e: the decision recorded in
// decided, else what its status says.
func outcomeOf(e store.Suspension, decided map[string]Outcome) Outcome {
	if o, ok := decided[e.ID]; ok {
		return o
	}
	switch e.Status {
	case store.StatusExpired:
		return Outcome{Word: "expired"}
	case store.StatusCancelled:
		return Outcome{Word: "cancelled"}
	case store.StatusResolved:
		return Outcome{Word: "answered"}
	}
	return Outcome{}
}

// outcomeWord says what a decision was: a yes-no payload (a boolean, or
// an object with exactly one boolean field, as the decide page's Approve
// and Reject set it) is approved or declined.
func outcomeWord(d machine.DecidedRecord) string {
	switch {
	case d.Decision == instance.EventCancelled:
		return "cancelled"
	case d.IsError:
		return "failed with an error"
	}
	var yes bool
	if json.Unmarshal(d.Payload, &yes) != nil {
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(d.Payload, &fields)
		n := 0
		for _, v := range fields {
			if s := string(v); s == "true" || s == "false" {
				yes, n = s == "true", n+1
			}
		}
		if n != 1 {
			return "answered"
		}
	}
	if yes {
		return "approved"
	}
	return "declined"
}
