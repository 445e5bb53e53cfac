package resumehttp

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/errtext"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// errorClass maps a sentinel error to a status code and an error code.
// The message is msg when set; otherwise the error's text for a person
// (errtext.ForPerson), for errors that describe the caller's input
// (schema failures and the like). Store
// errors get fixed messages: their text names the store's internals.
type errorClass struct {
	err    error
	status int
	code   string
	msg    string
}

// classes is tried in order with errors.Is; the first match wins. Unknown
// suspend IDs come before store.ErrNotFound, which the runner wraps in
// them; invalid input before payload decoding, which a command input that
// does not encode wraps in it; every class before command.ErrFailed, which
// wraps whatever a command's handler returned (a panic too).
var classes = []errorClass{
	{instance.ErrUnknownSuspendID, http.StatusNotFound, "unknown_suspension", "unknown suspend ID"},
	{store.ErrNotFound, http.StatusNotFound, "unknown_machine", "unknown machine"},
	{command.ErrNoTarget, http.StatusNotFound, "no_target", ""},
	{instance.ErrAlreadyResolved, http.StatusConflict, "already_resolved", "suspension already resolved"},
	{instance.ErrForbidden, http.StatusForbidden, "forbidden", ""},
	{instance.ErrStaleDecision, http.StatusConflict, "stale_decision", ""},
	{instance.ErrAlreadyDecided, http.StatusConflict, "already_decided", ""},
	{instance.ErrBadPolicy, http.StatusBadRequest, "bad_policy", ""},
	{store.ErrConflict, http.StatusConflict, "conflict", "another request saved the machine first"},
	{executor.ErrDuplicateID, http.StatusConflict, "duplicate_id", ""},
	{machine.ErrDeadlinePassed, http.StatusGone, "deadline_passed", "the suspension's deadline passed: its on-timeout action applies"},
	{instance.ErrInvalidEvent, http.StatusBadRequest, "invalid_event", ""},
	{durable.ErrInvalidSuspend, http.StatusBadRequest, "invalid_suspend", ""},
	{machine.ErrNoPrimary, http.StatusConflict, "no_primary", "the machine has no primary leaf to suspend"},
	{instance.ErrInvalidInput, http.StatusBadRequest, "invalid_input", ""},
	{instance.ErrPayloadDecode, http.StatusBadRequest, "payload_decode", ""},
	{command.ErrUnknownCommand, http.StatusBadRequest, "unknown_command", ""},
	{instance.ErrInvalidState, http.StatusBadRequest, "invalid_state", ""},
	{instance.ErrPanic, http.StatusInternalServerError, "internal", "internal error"},
	{command.ErrFailed, http.StatusUnprocessableEntity, "command_failed", ""},
	{store.ErrUnknownStatus, http.StatusBadRequest, "bad_request", ""},
	{errors.ErrUnsupported, http.StatusNotImplemented, "not_implemented", "not supported by this server"},
}

// classify returns the status, code and message of err: a class of
// classes, or 500 "internal error".
func classify(err error) (status int, code, msg string) {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			if c.msg != "" {
				return c.status, c.code, c.msg
			}
			return c.status, c.code, errtext.ForPerson(err)
		}
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

// ErrorStatus returns the HTTP status, the error code and the message
// for a person that the handler answers err with (the package
// documentation's table; 500 "internal error" for an error it does not
// know). Package webhook answers its refusals the same way.
func ErrorStatus(err error) (status int, code, msg string) { return classify(err) }

// fail answers with the status err maps to and logs err in full.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, attrs ...slog.Attr) {
	status, code, msg := classify(err)
	attrs = append(attrs, slog.String("error", err.Error()))
	h.writeError(w, r, status, code, msg, attrs...)
}

// writeError answers with an ErrorBody and logs the failure. A 5xx gets a
// fresh correlation ID, in the body and in the log record.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string, attrs ...slog.Attr) {
	level := slog.LevelInfo
	body := ErrorBody{Error: msg, Code: code}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusTooManyRequests:
		level = slog.LevelWarn
	case status >= 500:
		level = slog.LevelError
		body.CorrelationID = rand.Text()
		attrs = append(attrs, slog.String("correlation_id", body.CorrelationID))
	}
	attrs = append(attrs, slog.String("code", code), slog.String("reason", msg))
	h.respond(w, r, status, body, level, "resumehttp: request failed", attrs)
}

// jsonWriter is the ResponseWriter the endpoints answer through. Every
// answer of the handler is JSON: one that is not (a redirect of the mux to
// a clean path, say) is replaced by an ErrorBody with the same status and
// headers (Location stays).
type jsonWriter struct {
	http.ResponseWriter
	h        *Handler
	r        *http.Request
	wrote    bool // the status is written
	replaced bool // the answer was replaced: drop what follows
}

// WriteHeader writes the status, or the replacement answer when the
// headers do not declare JSON.
func (w *jsonWriter) WriteHeader(status int) {
	if w.wrote {
		w.ResponseWriter.WriteHeader(status) // superfluous: net/http says so
		return
	}
	w.wrote = true
	if ct := w.Header().Get("Content-Type"); ct == "application/json" || ct == "text/event-stream" {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.replaced = true
	w.Header().Del("Content-Length")
	code, msg := "bad_request", http.StatusText(status)
	switch {
	case status >= 300 && status < 400:
		code, msg = "redirect", "moved to "+w.Header().Get("Location")
	case status == http.StatusNotFound:
		code, msg = "not_found", "no such endpoint"
	case status == http.StatusMethodNotAllowed:
		code = "method_not_allowed"
	case status >= 500:
		code, msg = "internal", "internal error"
	}
	w.h.writeError(w.ResponseWriter, w.r, status, code, msg)
}

// Write writes p, or drops it after a replacement.
func (w *jsonWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap returns the underlying ResponseWriter, for
// http.ResponseController.
func (w *jsonWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeJSON answers with v and logs the success.
func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any, attrs ...slog.Attr) {
	h.respond(w, r, status, v, slog.LevelInfo, "resumehttp: request served", attrs)
}

func (h *Handler) respond(w http.ResponseWriter, r *http.Request, status int, v any, level slog.Level, msg string, attrs []slog.Attr) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a Summary's values could fail, and they are encoded before.
		h.log.LogAttrs(r.Context(), slog.LevelError, "resumehttp: response does not encode", slog.String("error", err.Error()))
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal error","code":"internal"}`)
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
	attrs = append([]slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status)}, attrs...)
	h.log.LogAttrs(r.Context(), level, msg, attrs...)
}

// ErrWeakSecret reports a Config.Secret shorter than MinSecretLen bytes or
// made of one repeated byte.
var ErrWeakSecret = errors.New("resumehttp: weak secret")

// authError is a failed authentication: its code and message.
type authError struct{ code, msg string }

// ErrInvalidConfig reports a Config New cannot build a Handler from: no
// Runner, a negative limit, or a weak Secret (then it wraps ErrWeakSecret
// too).
var ErrInvalidConfig = errors.New("resumehttp: invalid config")

// ErrBadQuery reports a malformed query parameter of GET /suspensions (an
// unknown status, a limit that is not a positive integer, a deadline that
// is not RFC 3339); the handler answers it with 400 bad_request and the
// error's message.
var ErrBadQuery = errors.New("resumehttp: bad query")

// ErrBadCursor reports a Last-Event-ID header or an "after" query
// parameter of an event stream that is not a sequence number
// ([ParseCursor]); the endpoint answers 400 bad_request.
var ErrBadCursor = errors.New("resumehttp: bad event cursor")

// ErrBadIdempotencyKey reports an Idempotency-Key header of a command
// that is repeated, empty, too long or holds a character outside
// A–Z a–z 0–9 - _ . : ~; the handler answers 400 bad_request and changes
// nothing.
var ErrBadIdempotencyKey = errors.New("resumehttp: bad Idempotency-Key")
