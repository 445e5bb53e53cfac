package resumehttp

// This file answers a second delivery of a signed state-changing request
// with the first one's outcome, as webhook senders expect of an
// idempotent receiver (internal/redelivery, shared with package webhook).

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/markov-agents/markov/internal/redelivery"
)

// serveFirst serves, with next, the first delivery of a state-changing request whose
// replay record is key, and keeps its answer with the record when the
// guard is a store.OutcomeKeeper. An answer of 5xx is not kept: whether
// the request applied is unknown.
func (h *Handler) serveFirst(w http.ResponseWriter, r *http.Request, key string, next http.Handler) {
	rec := redelivery.NewRecorder(w)
	next.ServeHTTP(rec, r)
	if err := redelivery.Keep(r.Context(), h.replays, key, rec); err != nil {
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
	o, found, ok, err := redelivery.Lookup(r.Context(), h.replays, key)
	switch {
	case !ok:
		h.writeError(w, r, http.StatusUnauthorized, "replayed_request", "this signed request was already received")
		return
	case err != nil:
		h.fail(w, r, fmt.Errorf("replay guard: %w", err))
		return
	case !found:
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
