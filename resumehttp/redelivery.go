package resumehttp

// This file answers a second delivery of a signed state-changing request
// with the first one's outcome, as webhook senders expect of an
// idempotent receiver.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/markov-agents/markov/store"
)

// maxOutcome is the largest answer body kept for redeliveries; the
// outcome of a larger one (a long run's summary) stays unknown to them.
const maxOutcome = 256 << 10

// outcome is a first delivery's answer, as the replay guard keeps it.
type outcome struct {
	Status   int             `json:"status"`
	Location string          `json:"location,omitempty"`
	Body     json.RawMessage `json:"body"`
}

// outcomeWriter records the answer it writes through.
type outcomeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	over   bool // the body outgrew maxOutcome
}

func (w *outcomeWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *outcomeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.over {
		if w.body.Len()+len(p) > maxOutcome {
			w.over, w.body = true, bytes.Buffer{}
		} else {
			w.body.Write(p)
		}
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap returns the underlying ResponseWriter, for
// http.ResponseController.
func (w *outcomeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveFirst serves the first delivery of a state-changing request whose
// replay record is key, and keeps its answer with the record when the
// guard is a store.OutcomeKeeper. An answer of 5xx is not kept: whether
// the request applied is unknown.
func (h *Handler) serveFirst(w http.ResponseWriter, r *http.Request, key string) {
	k, ok := h.replays.(store.OutcomeKeeper)
	if !ok {
		h.mux.ServeHTTP(w, r)
		return
	}
	ow := &outcomeWriter{ResponseWriter: w}
	h.mux.ServeHTTP(ow, r)
	if ow.status >= http.StatusInternalServerError || ow.over || !json.Valid(ow.body.Bytes()) {
		return
	}
	b, err := json.Marshal(outcome{Status: ow.status, Location: ow.Header().Get("Location"), Body: bytes.TrimSpace(ow.body.Bytes())})
	if err == nil {
		err = k.KeepOutcome(context.WithoutCancel(r.Context()), key, b)
	}
	if err != nil {
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "resumehttp: keep the outcome for redeliveries", slog.String("error", err.Error()))
	}
}

// redelivered answers a second delivery of a signed request whose replay
// record is key: with the first delivery's outcome when it is kept (200
// with its body when it succeeded, its status otherwise); 409
// redelivery_pending with Retry-After while the first is being served
// (or its outcome is unknown); 401 replayed_request when the guard keeps
// no outcomes.
func (h *Handler) redelivered(w http.ResponseWriter, r *http.Request, key string) {
	k, ok := h.replays.(store.OutcomeKeeper)
	if !ok {
		h.writeError(w, r, http.StatusUnauthorized, "replayed_request", "this signed request was already received")
		return
	}
	raw, err := k.Outcome(r.Context(), key)
	var o outcome
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Expired or forgotten since Remember: as good as in progress.
	case err != nil:
		h.fail(w, r, fmt.Errorf("replay guard: %w", err))
		return
	case raw != nil:
		err = json.Unmarshal(raw, &o)
	}
	if raw == nil || err != nil || o.Status == 0 {
		w.Header().Set("Retry-After", "1")
		h.writeError(w, r, http.StatusConflict, "redelivery_pending", "this signed request was already received; its outcome is not known yet")
		return
	}
	status := o.Status
	if status < http.StatusMultipleChoices {
		status = http.StatusOK
	}
	if o.Location != "" {
		w.Header().Set("Location", o.Location)
	}
	h.respond(w, r, status, o.Body, slog.LevelInfo, "resumehttp: redelivery answered with the first outcome", nil)
}
