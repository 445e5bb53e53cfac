package resumehttp

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
)

// errorClass maps a sentinel error to a status code and an error code.
// The message is msg when set; otherwise the error's own text, for errors
// that describe the caller's input (schema failures and the like). Store
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
// does not encode wraps in it.
var classes = []errorClass{
	{instance.ErrUnknownSuspendID, http.StatusNotFound, "unknown_suspension", "unknown suspend ID"},
	{store.ErrNotFound, http.StatusNotFound, "unknown_machine", "unknown machine"},
	{command.ErrNoTarget, http.StatusNotFound, "no_target", ""},
	{instance.ErrAlreadyResolved, http.StatusConflict, "already_resolved", "suspension already resolved"},
	{store.ErrConflict, http.StatusConflict, "conflict", "another request saved the machine first"},
	{instance.ErrDuplicateID, http.StatusConflict, "duplicate_id", ""},
	{instance.ErrDeadlinePassed, http.StatusGone, "deadline_passed", "the suspension's deadline passed: its on-timeout action applies"},
	{instance.ErrInvalidInput, http.StatusBadRequest, "invalid_input", ""},
	{instance.ErrPayloadDecode, http.StatusBadRequest, "payload_decode", ""},
	{command.ErrUnknownCommand, http.StatusBadRequest, "unknown_command", ""},
	{instance.ErrInvalidState, http.StatusBadRequest, "invalid_state", ""},
}

// classify returns the status, code and message of err: a class of
// classes, or 500 "internal error".
func classify(err error) (status int, code, msg string) {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			if c.msg != "" {
				return c.status, c.code, c.msg
			}
			return c.status, c.code, err.Error()
		}
	}
	return http.StatusInternalServerError, "internal", "internal error"
}

// fail answers with the status err maps to and logs err in full.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, attrs ...slog.Attr) {
	status, code, msg := classify(err)
	attrs = append(attrs, slog.String("error", err.Error()))
	h.writeError(w, r, status, code, msg, attrs...)
}

// writeError answers with an ErrorBody and logs the failure.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string, attrs ...slog.Attr) {
	level := slog.LevelInfo
	switch {
	case status == http.StatusUnauthorized:
		level = slog.LevelWarn
	case status >= 500:
		level = slog.LevelError
	}
	attrs = append(attrs, slog.String("code", code), slog.String("reason", msg))
	h.respond(w, r, status, ErrorBody{Error: msg, Code: code}, level, "resumehttp: request failed", attrs)
}

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
