package webhook

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/faillimit"
	"github.com/markov-agents/markov/internal/redelivery"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
)

// Defaults of Config.
const (
	// DefaultDeliveryWindow is how long a delivery ID is remembered, so
	// that a redelivery is answered with the first outcome, when
	// Config.DeliveryWindow is zero: three days, as long as Stripe and the
	// Standard Webhooks senders retry.
	DefaultDeliveryWindow = 72 * time.Hour
	// DefaultMaxBody is the largest delivery body accepted when
	// Config.MaxBody is zero.
	DefaultMaxBody = 1 << 20
)

// Acceptor accepts resumes and cancellations durably: *durable.Runner
// (the input is applied and saved under the machine's hold, the run goes
// on in the background) and *fleet.Fleet (the input is committed with the
// River job that applies it, in any process) are ones. Accepted means
// applied: a 2xx answer is never undone.
type Acceptor interface {
	// AcceptResume accepts the resume in.
	AcceptResume(ctx context.Context, in machine.ResumeInput) (durable.Accepted, error)
	// AcceptCancel accepts the cancellation in.
	AcceptCancel(ctx context.Context, in machine.CancelInput) (durable.Accepted, error)
}

// Signaler wakes the suspensions waiting for an event: *durable.Runner
// and *fleet.Fleet are ones.
type Signaler interface {
	// Signal resumes every suspension waiting for event with payload and
	// returns how many it woke.
	Signal(ctx context.Context, event string, payload any) (woken int, err error)
}

var (
	_ Acceptor = (*durable.Runner)(nil)
	_ Signaler = (*durable.Runner)(nil)
)

// Config configures a Handler. Zero fields take the documented defaults.
type Config struct {
	// Routes are the webhook endpoints. At least one.
	Routes []Route
	// Acceptor applies resumes and cancellations. Required.
	Acceptor Acceptor
	// Signaler applies signals; required when a route signals.
	Signaler Signaler
	// Replays remembers the delivery IDs served and their outcomes. If
	// nil, the Acceptor's store's (a ReplayGuard() method, as
	// *durable.Runner and *fleet.Fleet have), so that a redelivery to any
	// process of a fleet is answered with the first outcome; otherwise
	// this process's memory.
	Replays store.ReplayGuard
	// DeliveryWindow is how long a delivery ID is remembered
	// (DefaultDeliveryWindow if zero).
	DeliveryWindow time.Duration
	// MaxBody is the largest body accepted, in bytes (DefaultMaxBody if
	// zero); larger ones get 413.
	MaxBody int64
	// FailureBurst, FailureRefill and MaxClients bound failed
	// verifications per client address as resumehttp.Config's do (its
	// defaults if zero).
	FailureBurst  int
	FailureRefill time.Duration
	MaxClients    int
	// ClientKey names the client of a request for the failure limit (the
	// peer's IP address if nil): resumehttp.TrustedProxies behind reverse
	// proxies.
	ClientKey func(*http.Request) string
	// Clock tells the time for the tolerance and the failure limit
	// (time.Now if nil).
	Clock func() time.Time
	// Logger receives a record of every delivery (silent if nil).
	Logger *slog.Logger
}

// Result is the body of a delivery's answer: 202 for an accepted resume
// or cancellation, 200 for a signal, and 200 with the first delivery's
// body for a redelivery.
type Result struct {
	// DeliveryID is the delivery's ID.
	DeliveryID string `json:"delivery_id"`
	// Action is what the delivery did.
	Action Action `json:"action"`
	// MachineID and SuspendID name the suspension resumed or cancelled.
	MachineID string `json:"machine_id,omitempty"`
	SuspendID string `json:"suspend_id,omitempty"`
	// Event is the event signalled, Woken how many suspensions it woke.
	Event string `json:"event,omitempty"`
	Woken *int   `json:"woken,omitempty"`
}

// Handler serves the webhook routes of a Config. It is safe for
// concurrent use.
type Handler struct {
	acceptor Acceptor
	signaler Signaler
	replays  store.ReplayGuard
	window   time.Duration
	maxBody  int64
	limit    *faillimit.Limit
	client   func(*http.Request) string
	now      func() time.Time
	log      *slog.Logger
	mux      *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler for cfg, or an error wrapping ErrInvalidConfig
// (and ErrBadSecret for a secret that does not parse).
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Acceptor == nil:
		return nil, fmt.Errorf("%w: Acceptor is required", ErrInvalidConfig)
	case len(cfg.Routes) == 0:
		return nil, fmt.Errorf("%w: Routes: at least one route is required", ErrInvalidConfig)
	case cfg.DeliveryWindow < 0 || cfg.MaxBody < 0 || cfg.FailureBurst < 0 || cfg.FailureRefill < 0 || cfg.MaxClients < 0:
		return nil, fmt.Errorf("%w: DeliveryWindow, MaxBody, FailureBurst, FailureRefill and MaxClients must not be negative", ErrInvalidConfig)
	}
	h := &Handler{
		acceptor: cfg.Acceptor, signaler: cfg.Signaler, replays: cfg.Replays,
		window:  orDefault(cfg.DeliveryWindow, DefaultDeliveryWindow),
		maxBody: orDefault(cfg.MaxBody, DefaultMaxBody),
		limit: faillimit.New(orDefault(cfg.FailureBurst, resumehttp.DefaultFailureBurst),
			orDefault(cfg.FailureRefill, resumehttp.DefaultFailureRefill), orDefault(cfg.MaxClients, resumehttp.DefaultMaxClients)),
		client: cfg.ClientKey, now: cfg.Clock, log: cfg.Logger, mux: http.NewServeMux(),
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.client == nil {
		h.client = faillimit.RemoteIP
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.replays == nil {
		h.replays = redelivery.GuardOf(cfg.Acceptor)
	}
	if h.replays == nil {
		h.replays = &redelivery.Cache{Now: h.now}
	}
	seen := map[string]bool{}
	for _, rt := range cfg.Routes {
		if err := rt.check(cfg.Signaler != nil); err != nil {
			return nil, err
		}
		if seen[rt.Path] {
			return nil, fmt.Errorf("%w: route %s: two routes have this path", ErrInvalidConfig, rt.Path)
		}
		seen[rt.Path] = true
		v, err := newVerifier(rt.Scheme, rt.Secrets, orDefault(rt.Tolerance, DefaultTolerance))
		if err != nil {
			return nil, fmt.Errorf("%w: route %s: secrets: %w", ErrInvalidConfig, rt.Path, err)
		}
		if err := h.handle(rt.Path, &route{Route: rt, verifier: v, h: h}); err != nil {
			return nil, fmt.Errorf("%w: route %s: %v", ErrInvalidConfig, rt.Path, err)
		}
	}
	_ = h.handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.writeError(w, r, http.StatusNotFound, "unknown_route", "no webhook route here")
	}))
	return h, nil
}

// handle registers hd at pattern, turning the mux's panic on a bad or
// conflicting pattern into an error.
func (h *Handler) handle(pattern string, hd http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	h.mux.Handle(pattern, hd)
	return nil
}

// ServeHTTP serves a delivery: a client over its failure limit gets 429;
// an unknown path 404 unknown_route; a method other than POST 405; a body
// over MaxBody 413; a delivery whose headers are missing or malformed,
// whose timestamp is outside the tolerance or whose signature matches no
// secret 401 (bad_signature, stale_timestamp, missing_header,
// malformed_header); a delivery without its delivery ID 400. A verified
// delivery is served once per delivery ID: a redelivery is answered 200
// with the first delivery's body (its status if it was refused), or 409
// redelivery_pending with Retry-After while the first is being served.
// A refused delivery (4xx: nothing changed) is forgotten, so that its
// redelivery is judged afresh.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if wait := h.limit.Wait(h.client(r), h.now()); wait > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		h.writeError(w, r, http.StatusTooManyRequests, "rate_limited", "too many failed verifications from this address; retry later")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// route serves one Route.
type route struct {
	Route
	verifier *verifier
	h        *Handler
}

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := rt.h
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		h.writeError(w, r, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here (allowed: POST)")
		return
	}
	client := h.client(r)
	// A body is a failure until its signature checks out.
	h.limit.Fail(client, h.now())
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		w.Header().Set("Connection", "close")
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			h.writeError(w, r, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body exceeds %d bytes", h.maxBody))
			return
		}
		h.writeError(w, r, http.StatusBadRequest, "bad_request", "cannot read the body")
		return
	}
	headerID, err := rt.verifier.verify(r.Header, body, h.now())
	if err != nil {
		h.writeError(w, r, http.StatusUnauthorized, authCode(err), err.Error(), slog.String("route", rt.Path))
		return
	}
	h.limit.Forgive(client, h.now())
	id := headerID
	if src := rt.deliverySource(); rt.DeliveryID.set() != 0 || id == "" {
		if id, err = src.value(r, body); err != nil {
			h.writeError(w, r, http.StatusBadRequest, "missing_delivery_id", "delivery ID: "+err.Error(), slog.String("route", rt.Path))
			return
		}
	}
	key := deliveryKey(rt.Path, id)
	fresh, err := h.replays.Remember(r.Context(), key, h.now().Add(h.window))
	if err != nil {
		h.fail(w, r, fmt.Errorf("replay guard: %w", err))
		return
	}
	if !fresh {
		h.redelivered(w, r, key, id)
		return
	}
	rec := redelivery.NewRecorder(w)
	rt.apply(rec, r, id, body)
	var kept error
	if s := rec.Status(); s >= http.StatusBadRequest && s < http.StatusInternalServerError {
		kept = h.replays.Forget(context.WithoutCancel(r.Context()), key)
	} else {
		kept = redelivery.Keep(r.Context(), h.replays, key, rec)
	}
	if kept != nil {
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "webhook: keep the outcome for redeliveries", slog.String("error", kept.Error()))
	}
}

// apply does the route's action for the verified delivery id.
func (rt *route) apply(w http.ResponseWriter, r *http.Request, id string, body []byte) {
	h := rt.h
	res := Result{DeliveryID: id, Action: rt.Action}
	attrs := []slog.Attr{slog.String("route", rt.Path), slog.String("delivery_id", id), slog.String("action", string(rt.Action))}
	ctx := context.WithoutCancel(r.Context()) // once accepted, a sender hanging up changes nothing
	var err error
	var a durable.Accepted
	switch rt.Action {
	case Signal:
		var event string
		var payload json.RawMessage
		if event, err = rt.Event.value(r, body); err == nil {
			err = instance.CheckEvent(event)
		}
		if err == nil {
			payload, err = lookup(body, rt.Payload)
		}
		if err == nil {
			var woken int
			woken, err = h.signaler.Signal(ctx, event, payloadOf(payload))
			res.Event, res.Woken = event, &woken
		}
		if err == nil {
			h.writeJSON(w, r, http.StatusOK, res, append(attrs, slog.String("event", event), slog.Int("woken", *res.Woken))...)
			return
		}
	case Cancel:
		var reason string
		if res.SuspendID, err = rt.SuspendID.value(r, body); err == nil && rt.Payload != "" {
			reason, err = lookupString(body, rt.Payload)
		}
		if err == nil {
			a, err = h.acceptor.AcceptCancel(ctx, machine.CancelInput{SuspendID: res.SuspendID, Reason: reason})
		}
	default:
		var payload json.RawMessage
		if res.SuspendID, err = rt.SuspendID.value(r, body); err == nil {
			payload, err = lookup(body, rt.Payload)
		}
		if err == nil {
			a, err = h.acceptor.AcceptResume(ctx, machine.ResumeInput{SuspendID: res.SuspendID, Payload: payloadOf(payload)})
		}
	}
	if err != nil {
		h.fail(w, r, err, attrs...)
		return
	}
	res.MachineID = a.MachineID
	h.writeJSON(w, r, http.StatusAccepted, res, append(attrs, slog.String("machine", a.MachineID), slog.String("suspend_id", res.SuspendID))...)
}

// redelivered answers a redelivery of the delivery whose record is key.
func (h *Handler) redelivered(w http.ResponseWriter, r *http.Request, key, id string) {
	o, found, _, err := redelivery.Lookup(r.Context(), h.replays, key)
	switch {
	case err != nil:
		h.fail(w, r, fmt.Errorf("replay guard: %w", err))
		return
	case !found:
		w.Header().Set("Retry-After", "1")
		h.writeError(w, r, http.StatusConflict, "redelivery_pending", "this delivery was already received; its outcome is not known yet", slog.String("delivery_id", id))
		return
	}
	status := o.Status
	if status < http.StatusMultipleChoices {
		status = http.StatusOK
	}
	h.respond(w, r, status, o.Body, slog.LevelInfo, "webhook: redelivery answered with the first outcome", slog.String("delivery_id", id))
}

// deliveryKey is the replay guard's key for delivery id of the route at
// path.
func deliveryKey(path, id string) string {
	sum := sha256.Sum256([]byte(path + "\x00" + id))
	return "webhook:" + hex.EncodeToString(sum[:])
}

// authCode is the error code of a failed verification.
func authCode(err error) string {
	switch {
	case errors.Is(err, ErrStaleTimestamp):
		return "stale_timestamp"
	case errors.Is(err, ErrMissingHeader):
		return "missing_header"
	case errors.Is(err, ErrMalformedHeader):
		return "malformed_header"
	default:
		return "bad_signature"
	}
}

// payloadOf is raw as a payload: nil for JSON null.
func payloadOf(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// fail answers err as resumehttp does (resumehttp.ErrorStatus); a bad
// pointer or event is 400.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, attrs ...slog.Attr) {
	status, code, msg := resumehttp.ErrorStatus(err)
	if errors.Is(err, ErrBadPointer) {
		status, code, msg = http.StatusBadRequest, "bad_pointer", err.Error()
	}
	h.writeError(w, r, status, code, msg, append(attrs, slog.String("error", err.Error()))...)
}

// writeError answers with a resumehttp.ErrorBody; a 5xx gets a
// correlation ID.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string, attrs ...slog.Attr) {
	level := slog.LevelInfo
	body := resumehttp.ErrorBody{Error: msg, Code: code}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusTooManyRequests:
		level = slog.LevelWarn
	case status >= http.StatusInternalServerError:
		level = slog.LevelError
		body.CorrelationID = rand.Text()
		attrs = append(attrs, slog.String("correlation_id", body.CorrelationID))
	}
	h.respond(w, r, status, body, level, "webhook: delivery refused", append(attrs, slog.String("code", code))...)
}

func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any, attrs ...slog.Attr) {
	h.respond(w, r, status, v, slog.LevelInfo, "webhook: delivery served", attrs...)
}

func (h *Handler) respond(w http.ResponseWriter, r *http.Request, status int, v any, level slog.Level, msg string, attrs ...slog.Attr) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal error","code":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
	h.log.LogAttrs(r.Context(), level, msg, append([]slog.Attr{slog.String("path", r.URL.Path), slog.Int("status", status)}, attrs...)...)
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
