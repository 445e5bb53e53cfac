package resumehttp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/errtext"
	"github.com/markov-agents/markov/store"
)

// DefaultHeartbeat is how often an event stream without events sends a
// comment line, so that proxies keep it open, when Config.Heartbeat is
// zero.
const DefaultHeartbeat = 15 * time.Second

// Watcher is the optional capability of a [Runner] that serves the event
// streams, GET /machines/{id}/events and GET /suspensions/events.
// *durable.Runner has it; a runner that also has a CanWatch method
// reporting false (a durable.Runner whose store keeps no event log) is
// treated as lacking it.
type Watcher interface {
	// Watch yields machineID's events after sequence number afterSeq, then
	// live ones (durable.Runner.Watch).
	Watch(ctx context.Context, machineID string, afterSeq int64) iter.Seq2[durable.Event, error]
	// WatchSuspensions yields the suspension feed after afterCursor
	// (durable.Runner.WatchSuspensions).
	WatchSuspensions(ctx context.Context, afterCursor int64) iter.Seq2[store.SuspensionChange, error]
}

var _ Watcher = (*durable.Runner)(nil)

// SuspensionChange is the data of an event of GET /suspensions/events:
// a suspension that was created (status pending), resolved, expired or
// cancelled.
type SuspensionChange struct {
	// Cursor orders the feed; it is the event's SSE id.
	Cursor int64 `json:"cursor"`
	// At is when the change was saved.
	At time.Time `json:"at"`
	Suspension
}

// QueryTimestamp and QuerySignature are the query parameters that carry a
// GET request's authentication when it cannot set headers (a browser's
// EventSource): see [SignURL].
const (
	QueryTimestamp = "markov_ts"
	QuerySignature = "markov_sig"
)

// SignURL returns pathAndQuery (an escaped path, optionally followed by
// "?" and a raw query) with the authentication of a GET request signed at
// t appended as the QueryTimestamp and QuerySignature parameters. The
// signed message is the one of the headers, over the path and query
// without those two parameters, and the handler accepts it, like the
// headers, within Config.Window of t. A server that authenticated a
// browser by other means (a console session cookie) hands it such a URL
// to open an EventSource on; the URL is a bearer credential for that one
// GET until the window ends.
func SignURL(secret []byte, pathAndQuery string, t time.Time) string {
	ts, sig := Sign(secret, http.MethodGet, pathAndQuery, nil, t)
	sep := "?"
	if strings.Contains(pathAndQuery, "?") {
		sep = "&"
	}
	return pathAndQuery + sep + QueryTimestamp + "=" + ts + "&" + QuerySignature + "=" + strings.TrimPrefix(sig, signaturePrefix)
}

// ParseCursor returns the position an event stream resumes after: the
// Last-Event-ID header (what an EventSource sends when it reconnects)
// when set, else the "after" query parameter, else 0 (from the start).
// Either must be a decimal integer from 0 to 2^63-1; anything else is an
// error wrapping ErrBadCursor.
func ParseCursor(lastEventID, after string) (int64, error) {
	v, what := lastEventID, "Last-Event-ID"
	if strings.TrimSpace(v) == "" {
		v, what = after, "after"
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || v[0] == '+' {
		return 0, fmt.Errorf("%w: %s %q is not a sequence number", ErrBadCursor, what, errtext.Clip(v, 32))
	}
	return n, nil
}

// canWatch reports whether the runner serves event streams.
func (h *Handler) canWatch() (Watcher, bool) {
	w, ok := h.runner.(Watcher)
	if c, has := h.runner.(interface{ CanWatch() bool }); ok && has {
		ok = c.CanWatch()
	}
	return w, ok
}

// notWatchable answers 501 for a runner without event streams.
func (h *Handler) notWatchable(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, r, http.StatusNotImplemented, "not_implemented", "this server's runner does not offer Watcher (its store keeps no event log)")
}

// machineEvents serves GET /machines/{id}/events.
func (h *Handler) machineEvents(w http.ResponseWriter, r *http.Request) {
	wt, ok := h.canWatch()
	if !ok {
		h.notWatchable(w, r)
		return
	}
	id := r.PathValue("id")
	if !store.ValidID(id) {
		h.writeError(w, r, http.StatusNotFound, "unknown_machine", "unknown machine")
		return
	}
	after, ok := h.cursor(w, r)
	if !ok {
		return
	}
	h.stream(w, r, func(ctx context.Context, send func(sseEvent) bool) error {
		for e, err := range wt.Watch(ctx, id, after) {
			if err != nil {
				return err
			}
			if !send(machineEvent(e)) {
				return nil
			}
		}
		return nil
	}, slog.String("machine", id))
}

// machineEvent is the SSE form of a machine's event: its sequence number
// as id (none for a live event), its kind, and the event as JSON; an echo
// is an id alone, which moves the client's Last-Event-ID on and shows
// nothing.
func machineEvent(e durable.Event) sseEvent {
	ev := sseEvent{name: string(e.Kind), data: e}
	if e.Seq > 0 {
		ev.id = strconv.FormatInt(e.Seq, 10)
	}
	if e.Echo {
		ev.name, ev.data = "", nil
	}
	return ev
}

// suspensionEvents serves GET /suspensions/events.
func (h *Handler) suspensionEvents(w http.ResponseWriter, r *http.Request) {
	wt, ok := h.canWatch()
	if !ok {
		h.notWatchable(w, r)
		return
	}
	after, ok := h.cursor(w, r)
	if !ok {
		return
	}
	h.stream(w, r, func(ctx context.Context, send func(sseEvent) bool) error {
		for c, err := range wt.WatchSuspensions(ctx, after) {
			if err != nil {
				return err
			}
			ev := sseEvent{id: strconv.FormatInt(c.Cursor, 10), name: string(c.Suspension.Status),
				data: SuspensionChange{Cursor: c.Cursor, At: c.At, Suspension: suspensionOf(c.Suspension)}}
			if !send(ev) {
				return nil
			}
		}
		return nil
	})
}

// cursor parses the request's resume position, answering 400 when it is
// malformed.
func (h *Handler) cursor(w http.ResponseWriter, r *http.Request) (int64, bool) {
	n, err := ParseCursor(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after"))
	if err != nil {
		h.writeError(w, r, http.StatusBadRequest, "bad_request", err.Error())
		return 0, false
	}
	return n, true
}

// sseEvent is one Server-Sent Event; data nil writes no data (an id
// alone).
type sseEvent struct {
	id, name string
	data     any
}

// write writes e in the text/event-stream format.
func (e sseEvent) write(b *strings.Builder) error {
	if e.id != "" {
		fmt.Fprintf(b, "id: %s\n", e.id)
	}
	if e.data != nil {
		data, err := json.Marshal(e.data)
		if err != nil {
			return err
		}
		if e.name != "" {
			fmt.Fprintf(b, "event: %s\n", e.name)
		}
		fmt.Fprintf(b, "data: %s\n", data) // JSON has no raw newlines
	}
	b.WriteString("\n")
	return nil
}

// stream answers with a text/event-stream of what watch sends, with a
// heartbeat comment whenever nothing was sent for a heartbeat period,
// until the client goes away or watch ends. watch runs on a goroutine of
// its own; send reports false once the stream is over.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, watch func(ctx context.Context, send func(sseEvent) bool) error, attrs ...slog.Attr) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan sseEvent, 64)
	done := make(chan error, 1)
	go func() {
		done <- watch(ctx, func(e sseEvent) bool {
			select {
			case events <- e:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	h.log.LogAttrs(r.Context(), slog.LevelInfo, "resumehttp: event stream opened", append(attrs, slog.String("path", r.URL.Path))...)
	beat := time.NewTicker(h.heartbeat)
	defer beat.Stop()
	write := func(text string) bool {
		// Each write gets its own deadline: the server's WriteTimeout
		// would cut a long stream.
		_ = rc.SetWriteDeadline(time.Now().Add(h.heartbeat + 10*time.Second))
		if _, err := w.Write([]byte(text)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(": markov event stream\nretry: 2000\n\n") {
		return
	}
	for {
		var b strings.Builder
		select {
		case e := <-events:
			if err := writeQueued(&b, e, events); err != nil {
				h.streamFailed(w, r, err, write)
				return
			}
		case <-beat.C:
			b.WriteString(": heartbeat\n\n")
		case err := <-done:
			if err != nil && r.Context().Err() == nil {
				h.streamFailed(w, r, err, write)
			}
			return
		}
		beat.Reset(h.heartbeat)
		if !write(b.String()) {
			return
		}
	}
}

// writeQueued writes e and what else is queued on events into b, for one
// write.
func writeQueued(b *strings.Builder, e sseEvent, events <-chan sseEvent) error {
	for {
		if err := e.write(b); err != nil {
			return err
		}
		select {
		case e = <-events:
		default:
			return nil
		}
	}
}

// streamFailed ends a stream with an "error" event carrying an ErrorBody
// (500: details logged under its correlation ID, as for other answers).
func (h *Handler) streamFailed(w http.ResponseWriter, r *http.Request, err error, write func(string) bool) {
	status, code, msg := classify(err)
	body := ErrorBody{Error: msg, Code: code}
	attrs := []slog.Attr{slog.String("error", err.Error()), slog.Int("status", status)}
	if status >= http.StatusInternalServerError {
		body.CorrelationID = rand.Text()
		attrs = append(attrs, slog.String("correlation_id", body.CorrelationID))
	}
	h.log.LogAttrs(r.Context(), slog.LevelError, "resumehttp: event stream failed", attrs...)
	var b strings.Builder
	if (sseEvent{name: "error", data: body}).write(&b) == nil {
		write(b.String())
	}
}

// heartbeatOf is Config.Heartbeat with its default; a negative one is
// refused by New.
func heartbeatOf(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultHeartbeat
	}
	return min(d, math.MaxInt64/2)
}
