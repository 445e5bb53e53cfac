package resumehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/faillimit"
	"github.com/markov-agents/markov/internal/redelivery"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
)

// Defaults of Config.
const (
	// DefaultWindow is how far a request's timestamp may be from the
	// handler's clock when Config.Window is zero.
	DefaultWindow = 5 * time.Minute
	// DefaultMaxBody is the largest request body accepted when
	// Config.MaxBody is zero.
	DefaultMaxBody = 1 << 20
	// MinSecretLen is the shortest Config.Secret New accepts, in bytes.
	MinSecretLen = 32
	// DefaultFailureBurst is how many failed authentications a client
	// address may make in a row when Config.FailureBurst is zero.
	DefaultFailureBurst = 10
	// DefaultFailureRefill is how long it takes for one failed
	// authentication to be forgiven when Config.FailureRefill is zero.
	DefaultFailureRefill = 6 * time.Second
	// DefaultMaxClients is how many client addresses the failure limit
	// remembers when Config.MaxClients is zero.
	DefaultMaxClients = 10000
)

// CheckSecret returns an error wrapping ErrWeakSecret if secret is too
// weak to sign requests with: shorter than MinSecretLen bytes, or one byte
// repeated. New calls it; use it to check a secret from the environment
// before serving.
func CheckSecret(secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("%w: %d bytes, at least %d needed", ErrWeakSecret, len(secret), MinSecretLen)
	}
	if bytes.Count(secret, secret[:1]) == len(secret) {
		return fmt.Errorf("%w: one character repeated", ErrWeakSecret)
	}
	return nil
}

// Runner is what the handler needs of a durable runner to serve its core
// endpoints: resume, cancel and get a suspension. *durable.Runner
// satisfies it, and every optional interface below. Its errors are mapped
// to status codes with errors.Is (see the package documentation).
//
// The other endpoints need more, discovered by type assertion on the
// runner, the way http.Flusher is on an http.ResponseWriter: listing needs
// a [Lister], the command endpoints a [Commander]; without them those
// endpoints answer 501 not_implemented. A [CallFinder] adds the payload
// schema to GET /suspensions/{id}.
type Runner interface {
	// Resume checks the resume in and returns the run that applies it to
	// the machine holding its suspension; a refused resume is the error.
	Resume(ctx context.Context, in machine.ResumeInput) (*durable.Run, error)
	// Cancel checks the cancellation in and returns the run that applies
	// it: the call gets the error result "cancelled: reason".
	Cancel(ctx context.Context, in machine.CancelInput) (*durable.Run, error)
	// Suspension returns the index entry of suspendID.
	Suspension(ctx context.Context, suspendID string) (store.Suspension, error)
}

// CallFinder is the optional capability of a [Runner] that returns a
// pending call as its machine records it, for its payload schema.
type CallFinder interface {
	// Call returns the pending call suspendID.
	Call(ctx context.Context, suspendID string) (instance.SuspendedCall, error)
}

// Lister is the optional capability of a [Runner] that serves
// GET /suspensions.
type Lister interface {
	// Pending lists the suspensions f selects (f.Status empty: pending).
	Pending(ctx context.Context, f store.Filter) ([]store.Suspension, error)
}

// Commander is the optional capability of a [Runner] that serves the
// command endpoints, GET /machines/{id}/commands and
// POST /machines/{id}/commands/{name}.
type Commander interface {
	// Commands lists the commands of every instance of machineID.
	Commands(ctx context.Context, machineID string) ([]durable.CommandInfo, error)
	// Invoke checks the command invocation and returns the run that
	// applies it to machineID; a refused invocation is the error.
	Invoke(ctx context.Context, machineID string, inv command.Invocation) (*durable.Run, error)
}

// *durable.Runner offers every capability.
var (
	_ Runner     = (*durable.Runner)(nil)
	_ CallFinder = (*durable.Runner)(nil)
	_ Lister     = (*durable.Runner)(nil)
	_ Commander  = (*durable.Runner)(nil)
)

// Config configures a Handler. Zero fields take the documented defaults.
type Config struct {
	// Runner runs the machines. Required.
	Runner Runner
	// Secret is the HMAC-SHA256 key shared with the clients. Required, at
	// least MinSecretLen bytes and not one repeated byte (CheckSecret):
	// for example 32 random bytes, hex-encoded.
	Secret []byte
	// Window is how far a request's timestamp may be from Clock, in either
	// direction (DefaultWindow if zero). It bounds replays.
	Window time.Duration
	// MaxBody is the largest request body accepted, in bytes; larger ones
	// get 413 (DefaultMaxBody if zero).
	MaxBody int64
	// FailureBurst is how many failed authentications (401s) a client
	// address may make in a row before its requests are refused with 429
	// (DefaultFailureBurst if zero).
	FailureBurst int
	// FailureRefill is how long it takes for one failed authentication to
	// be forgiven (DefaultFailureRefill if zero): after its burst, a client
	// may fail once per FailureRefill.
	FailureRefill time.Duration
	// MaxClients bounds how many client addresses the failure limit
	// remembers (DefaultMaxClients if zero).
	MaxClients int
	// ClientKey names the client of a request for the failure limit (the
	// IP address of r.RemoteAddr if nil). Behind a reverse proxy every
	// request comes from the proxy's address: return the client address
	// the proxy forwards, from a header only it can set (TrustedProxies).
	ClientKey func(r *http.Request) string
	// Clock tells the time for the replay window and the failure limit
	// (time.Now if nil). A shared replay guard (Replays) decides on its
	// own clock when a remembered signature expires.
	Clock func() time.Time
	// Replays remembers the signatures of the state-changing requests
	// served, to refuse a second delivery of one. If nil, the runner's
	// store is used when the runner has a ReplayGuard() store.ReplayGuard
	// method that returns one (*durable.Runner does, on every store of this
	// module), so that every handler sharing the store refuses it;
	// otherwise each handler remembers in its own memory.
	Replays store.ReplayGuard
	// Heartbeat is how often an event stream that has nothing to send
	// sends a comment line, so that proxies keep it open
	// (DefaultHeartbeat if zero).
	Heartbeat time.Duration
	// Acceptor, if set, answers resumes, cancellations and commands with
	// 202 Accepted once their input is durable, instead of after the run
	// they start (see the package documentation): the runner itself for
	// the embedded default (*durable.Runner), or a *fleet.Fleet.
	Acceptor Acceptor
	// MaxWait bounds how long a request with Prefer: wait=N waits for its
	// run before answering 202 (DefaultMaxWait if zero; negative: never
	// wait). Keep it under the server's WriteTimeout.
	MaxWait time.Duration
	// IdempotencyWindow is how long the Idempotency-Key of a command is
	// remembered (DefaultIdempotencyWindow if zero), in the same store as
	// the signatures (Replays).
	IdempotencyWindow time.Duration
	// BasePath is the path the handler is mounted under, for the Location
	// of a 202 answer ("" when mounted at the root, as it should be: the
	// path the handler sees is the one signed).
	BasePath string
	// Logger receives a record of every request handled: failures of
	// authentication at Warn, internal errors (with their details) at Error,
	// the rest at Info (silent if nil).
	Logger *slog.Logger
}

// Handler serves the endpoints of the package documentation. It is safe
// for concurrent use.
type Handler struct {
	runner  Runner
	secret  []byte
	window  time.Duration
	maxBody int64
	now     func() time.Time
	log     *slog.Logger
	mux     *http.ServeMux
	replays store.ReplayGuard
	limit   *faillimit.Limit
	client  func(*http.Request) string
	// heartbeat is Config.Heartbeat with its default.
	heartbeat time.Duration
	acceptor  Acceptor
	maxWait   time.Duration
	basePath  string
	idemTTL   time.Duration
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler for cfg.
func New(cfg Config) (*Handler, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	h := &Handler{
		runner:    cfg.Runner,
		secret:    bytes.Clone(cfg.Secret),
		window:    cfg.Window,
		maxBody:   cfg.MaxBody,
		now:       cfg.Clock,
		log:       cfg.Logger,
		client:    cfg.ClientKey,
		heartbeat: heartbeatOf(cfg.Heartbeat),
		acceptor:  cfg.Acceptor,
		maxWait:   orDefault(cfg.MaxWait, DefaultMaxWait),
		basePath:  strings.TrimSuffix(cfg.BasePath, "/"),
		idemTTL:   orDefault(cfg.IdempotencyWindow, DefaultIdempotencyWindow),
		limit:     faillimit.New(orDefault(cfg.FailureBurst, DefaultFailureBurst), orDefault(cfg.FailureRefill, DefaultFailureRefill), orDefault(cfg.MaxClients, DefaultMaxClients)),
	}
	if h.client == nil {
		h.client = faillimit.RemoteIP
	}
	if h.window == 0 {
		h.window = DefaultWindow
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.replays = replayGuard(cfg)
	if h.replays == nil {
		h.replays = &redelivery.Cache{Now: h.now}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.mux = h.routes()
	return h, nil
}

// checkConfig returns an error wrapping ErrInvalidConfig if New cannot
// build a Handler from cfg.
func checkConfig(cfg Config) error {
	switch {
	case cfg.Runner == nil:
		return fmt.Errorf("%w: Runner is required", ErrInvalidConfig)
	case cfg.Window < 0:
		return fmt.Errorf("%w: Window is negative", ErrInvalidConfig)
	case cfg.MaxBody < 0:
		return fmt.Errorf("%w: MaxBody is negative", ErrInvalidConfig)
	case cfg.Heartbeat < 0 || cfg.IdempotencyWindow < 0:
		return fmt.Errorf("%w: Heartbeat or IdempotencyWindow is negative", ErrInvalidConfig)
	case cfg.FailureBurst < 0 || cfg.FailureRefill < 0 || cfg.MaxClients < 0:
		return fmt.Errorf("%w: FailureBurst, FailureRefill or MaxClients is negative", ErrInvalidConfig)
	}
	if err := CheckSecret(cfg.Secret); err != nil {
		return fmt.Errorf("%w: Secret: %w", ErrInvalidConfig, err)
	}
	return nil
}

// replayGuard is the shared replay guard of cfg: Config.Replays, or the
// one of the runner's store; nil if neither.
func replayGuard(cfg Config) store.ReplayGuard {
	if cfg.Replays != nil {
		return cfg.Replays
	}
	return redelivery.GuardOf(cfg.Runner)
}

// bodyKey carries the verified request body to the endpoint handlers.
type bodyKey struct{}

func (h *Handler) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /suspensions/{id}/resume", h.resume)
	mux.HandleFunc("GET /suspensions", needs(h, h.list))
	mux.HandleFunc("GET /suspensions/{id}", h.get)
	mux.HandleFunc("DELETE /suspensions/{id}", h.cancel)
	mux.HandleFunc("GET /machines/{id}", needs(h, h.status))
	mux.HandleFunc("GET /parked", needs(h, h.parked))
	mux.HandleFunc("GET /machines/{id}/commands", needs(h, h.commands))
	mux.HandleFunc("POST /machines/{id}/commands/{name}", needs(h, h.invoke))
	mux.HandleFunc("POST /machines/{id}/suspend", needs(h, h.suspend))
	mux.HandleFunc("POST /events/{name...}", needs(h, h.signal))
	mux.HandleFunc("GET /machines/{id}/events", h.machineEvents)
	mux.HandleFunc("GET /suspensions/events", h.suspensionEvents)
	// Patterns without a method catch the other methods of each path, so
	// that a 405 has a JSON body too; "/" catches unknown paths.
	for path, allow := range map[string]string{
		"/suspensions/{id}/resume":       "POST",
		"/suspensions":                   "GET, HEAD",
		"/suspensions/{id}":              "DELETE, GET, HEAD",
		"/machines/{id}":                 "GET, HEAD",
		"/parked":                        "GET, HEAD",
		"/machines/{id}/commands":        "GET, HEAD",
		"/machines/{id}/commands/{name}": "POST",
		"/machines/{id}/suspend":         "POST",
		"/events/{name...}":              "POST",
		"/machines/{id}/events":          "GET, HEAD",
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			h.writeError(w, r, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here (allowed: "+allow+")")
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.writeError(w, r, http.StatusNotFound, "not_found", "no such endpoint")
	})
	return mux
}

// ServeHTTP authenticates the request, then serves it. A client address
// over its failure limit, and unsigned, stale or malformed requests, are
// refused before their body is read; the signature is then checked over
// the body read up to MaxBody, before any other work. A body over MaxBody
// is answered 413 once read to its end (up to 16 MiB; one declared larger
// is not read), so that the client reads the answer.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.mux) }

// serve authenticates r and serves it with next.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	jw := &jsonWriter{ResponseWriter: w, h: h, r: r}
	defer h.recoverPanic(jw, r)
	r, sig, ok := h.authenticate(jw, r)
	if !ok {
		return
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		next.ServeHTTP(jw, r)
		return
	}
	key := replayKey(sig)
	if first, ok := h.firstDelivery(jw, r, key); ok {
		if first {
			h.serveFirst(jw, r, key, next)
		} else {
			h.redelivered(jw, r, key)
		}
	}
}

// Protect returns next behind the handler's authentication, for an
// endpoint of another package served beside the API (an AG-UI endpoint):
// the same failure limit, signature (headers, or the query of a signed
// URL for a GET), replay window and body limit as the API's own
// endpoints, refused with the same JSON errors. next receives the
// request with its verified body to read again. The replay guard is
// next's business: a signed request may reach it twice within the
// window.
func (h *Handler) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jw := &jsonWriter{ResponseWriter: w, h: h, r: r}
		defer h.recoverPanic(jw, r)
		if r, _, ok := h.authenticate(jw, r); ok {
			next.ServeHTTP(w, r)
		}
	})
}

// authenticate checks the request: a client address over its failure
// limit, and unsigned, stale or malformed requests, are refused before
// their body is read; the signature is then checked over the body read
// up to MaxBody. It returns the request carrying its verified body and
// the signature, or ok false when it has answered.
func (h *Handler) authenticate(jw *jsonWriter, r *http.Request) (_ *http.Request, sig []byte, ok bool) {
	client := h.client(r)
	if wait := h.limit.Wait(client, h.now()); wait > 0 {
		jw.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
		h.refuse(jw, r, http.StatusTooManyRequests, "rate_limited", "too many failed authentications from this address; retry later")
		return nil, nil, false
	}
	ts, sig, aerr := checkHeaders(r, h.now(), h.window)
	if aerr != nil {
		h.limit.Fail(client, h.now())
		h.refuse(jw, r, http.StatusUnauthorized, aerr.code, aerr.msg)
		return nil, nil, false
	}
	// A body is a failure until its signature checks out: a client has at
	// most its burst of unverified bodies in the air, and it gets the token
	// back once verified.
	h.limit.Fail(client, h.now())
	if r.ContentLength > h.maxBody {
		h.refuseTooLarge(jw, r)
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(jw.ResponseWriter, r.Body, h.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			h.refuseTooLarge(jw, r)
			return nil, nil, false
		}
		h.refuse(jw, r, http.StatusBadRequest, "bad_request", "cannot read the request body")
		return nil, nil, false
	}
	if !verify(h.secret, r, ts, sig, body) {
		h.writeError(jw, r, http.StatusUnauthorized, "bad_signature", "signature does not match")
		return nil, nil, false
	}
	// Verified: not a failed authentication, a second delivery of a
	// signed request neither (a sender retrying is not an attacker).
	h.limit.Forgive(client, h.now())
	r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r, sig, true
}

// needs serves an endpoint with the capability C of the handler's
// acceptor or, if it lacks it, of its runner; or answers 501
// not_implemented when neither has it.
func needs[C any](h *Handler, serve func(http.ResponseWriter, *http.Request, C)) http.HandlerFunc {
	c, ok := h.acceptor.(C)
	if !ok {
		c, ok = h.runner.(C)
	}
	if !ok {
		return func(w http.ResponseWriter, r *http.Request) {
			h.writeError(w, r, http.StatusNotImplemented, "not_implemented",
				fmt.Sprintf("this server's runner does not offer %s", reflect.TypeFor[C]().Name()))
		}
	}
	return func(w http.ResponseWriter, r *http.Request) { serve(w, r, c) }
}

// firstDelivery records key, the signature of a state-changing request,
// with the replay guard and reports whether this is its first delivery;
// ok is false when the guard failed, and it has answered 500. A
// request's timestamp is at most window in the future, so it stays
// acceptable for at most 2×window from now: that long is remembered.
func (h *Handler) firstDelivery(w http.ResponseWriter, r *http.Request, key string) (first, ok bool) {
	fresh, err := h.replays.Remember(r.Context(), key, h.now().Add(2*h.window))
	if err != nil {
		h.fail(w, r, fmt.Errorf("replay guard: %w", err))
		return false, false
	}
	return fresh, true
}

func (h *Handler) tooLarge() string {
	return fmt.Sprintf("request body exceeds %d bytes", h.maxBody)
}

// refuse answers a request whose body is left unread, and closes the
// connection rather than let the server drain the body.
// drainLimit is how much of a body over MaxBody the handler reads before it
// answers 413: a client that writes its whole request before it reads
// the answer would otherwise meet a connection reset (the server closing
// with the body unread) instead of the answer. A body declared larger is
// not read at all.
const drainLimit = 16 << 20

// refuseTooLarge answers 413 body_too_large and closes the connection,
// having read what is left of the body first, up to drainLimit (bounded
// in time by the server's ReadTimeout).
func (h *Handler) refuseTooLarge(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength <= drainLimit {
		_, _ = io.CopyN(io.Discard, r.Body, drainLimit)
	}
	h.refuse(w, r, http.StatusRequestEntityTooLarge, "body_too_large", h.tooLarge())
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Connection", "close")
	h.writeError(w, r, status, code, msg)
}

// recoverPanic turns a panic of an endpoint into a 500 with a correlation
// ID, logged with the panic value and the stack. http.ErrAbortHandler
// goes on up, as net/http expects.
func (h *Handler) recoverPanic(w *jsonWriter, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler { //nolint:errorlint // the sentinel is panicked as is
		panic(p)
	}
	attrs := []slog.Attr{slog.Any("panic", p), slog.String("stack", string(debug.Stack()))}
	if w.wrote {
		h.log.LogAttrs(r.Context(), slog.LevelError, "resumehttp: panic after the answer began", attrs...)
		return
	}
	h.writeError(w, r, http.StatusInternalServerError, "internal", "internal error", attrs...)
}

// runContext is the context of a run started by r: detached from the
// request's cancellation, so that a client hanging up does not stop a run
// whose input is already saved.
func runContext(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }

func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	onPending(h, w, r, "resume", h.resumeRun, func(ctx context.Context, id string, req ResumeRequest) (durable.Accepted, error) {
		return h.acceptor.AcceptResume(ctx, resumeInput(id, req))
	})
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	onPending(h, w, r, "cancel", func(ctx context.Context, id string, req CancelRequest) (*durable.Run, error) {
		return h.runner.Cancel(ctx, cancelInput(id, req))
	}, func(ctx context.Context, id string, req CancelRequest) (durable.Accepted, error) {
		return h.acceptor.AcceptCancel(ctx, cancelInput(id, req))
	})
}

// onPending serves an operation on the pending suspension named in the
// path: it decodes the body into a Req, checks that the suspension is
// pending, and answers with the run that start checks in (or the refusal),
// or — with an Acceptor — with the acceptance of accept; logged as op.
func onPending[Req any](h *Handler, w http.ResponseWriter, r *http.Request, op string,
	start func(ctx context.Context, id string, req Req) (*durable.Run, error),
	accept func(ctx context.Context, id string, req Req) (durable.Accepted, error)) {
	id := r.PathValue("id")
	var req Req
	if !h.decode(w, r, &req) {
		return
	}
	sus, ok := h.pending(w, r, id)
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("op", op), slog.String("suspend_id", id)}
	if h.acceptor == nil {
		run, err := start(runContext(r), id, req)
		if err != nil {
			h.fail(w, r, err, append(attrs, slog.String("machine", sus.MachineID))...)
			return
		}
		h.finish(w, r, run.MachineID(), run.Steps(), attrs...)
		return
	}
	a, err := accept(runContext(r), id, req)
	if err != nil {
		h.fail(w, r, err, append(attrs, slog.String("machine", sus.MachineID))...)
		return
	}
	h.accepted(w, r, a, attrs...)
}

// machineRequest returns the machine ID of r's path and r's body decoded
// as a T; false when it answered r with an error (a malformed ID, a body
// that does not decode).
func machineRequest[T any](h *Handler, w http.ResponseWriter, r *http.Request) (id string, req T, ok bool) {
	id = r.PathValue("id")
	if err := store.CheckID(id); err != nil {
		h.fail(w, r, err)
		return id, req, false
	}
	return id, req, h.decode(w, r, &req)
}

func (h *Handler) invoke(w http.ResponseWriter, r *http.Request, c Commander) {
	id, req, ok := machineRequest[InvokeRequest](h, w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	key, err := idempotencyKey(r.Header)
	if err != nil {
		h.writeError(w, r, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if key != "" && !h.firstInvocation(w, r, id, key) {
		return
	}
	inv := command.Invocation{Name: name, InstanceID: req.InstanceID, ID: key, Input: payloadOf(req.Input)}
	ctx := runContext(r)
	attrs := []slog.Attr{slog.String("op", "invoke"), slog.String("command", name)}
	refused := h.giveBack(r, id, key)
	if h.acceptor == nil {
		run, err := c.Invoke(ctx, id, inv)
		if err != nil {
			refused(err)
			h.fail(w, r, err, append(attrs, slog.String("machine", id))...)
			return
		}
		h.finish(w, r, id, beforeAnyStep(run.Steps(), refused), attrs...)
		return
	}
	a, err := h.acceptor.AcceptInvoke(ctx, id, inv)
	if err != nil {
		refused(err)
		h.fail(w, r, err, append(attrs, slog.String("machine", id))...)
		return
	}
	h.accepted(w, r, a, attrs...)
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sus, err := h.suspension(r, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := suspensionOf(sus)
	if c, ok := h.runner.(CallFinder); ok && sus.Status == store.StatusPending {
		call, err := c.Call(r.Context(), id)
		switch {
		case err == nil:
			out.PayloadSchema, out.Digest, out.Policy, out.Decisions = call.PayloadSchema, call.Digest, call.Policy, call.Decisions
		case !errors.Is(err, instance.ErrAlreadyResolved): // resolved meanwhile: the entry is enough
			h.fail(w, r, err)
			return
		}
	}
	h.writeJSON(w, r, http.StatusOK, out)
}

// listFilter reads the filter of GET /suspensions from its query: status
// (default pending), machine, limit and deadline_before. A malformed
// parameter is an error wrapping ErrBadQuery, whose message names it.
func listFilter(q url.Values) (store.Filter, error) {
	f := store.Filter{Status: store.StatusPending, MachineID: q.Get("machine")}
	if v := q.Get("status"); v != "" {
		st, err := store.ParseStatus(v)
		if err != nil {
			return f, fmt.Errorf("%w: status must be pending, resolved, expired or cancelled", ErrBadQuery)
		}
		f.Status = st
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return f, fmt.Errorf("%w: limit must be a positive integer", ErrBadQuery)
		}
		f.Limit = n
	}
	if v := q.Get("deadline_before"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return f, fmt.Errorf("%w: deadline_before must be an RFC 3339 time", ErrBadQuery)
		}
		f.DeadlineBefore = t
	}
	return f, nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, l Lister) {
	f, err := listFilter(r.URL.Query())
	if err != nil {
		h.writeError(w, r, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	list, err := l.Pending(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := SuspensionList{Suspensions: make([]Suspension, len(list))}
	for i, s := range list {
		out.Suspensions[i] = suspensionOf(s)
	}
	h.writeJSON(w, r, http.StatusOK, out)
}

func (h *Handler) commands(w http.ResponseWriter, r *http.Request, c Commander) {
	id := r.PathValue("id")
	err := store.CheckID(id)
	var cmds []durable.CommandInfo
	if err == nil {
		cmds, err = c.Commands(r.Context(), id)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if cmds == nil {
		cmds = []durable.CommandInfo{}
	}
	h.writeJSON(w, r, http.StatusOK, CommandList{MachineID: id, Commands: cmds})
}

// pending looks suspendID up in the index and answers 404 if it is
// unknown, 409 if it is no longer pending. Looking it up first also names
// the machine for the summary.
func (h *Handler) pending(w http.ResponseWriter, r *http.Request, suspendID string) (store.Suspension, bool) {
	sus, err := h.suspension(r, suspendID)
	if err != nil {
		h.fail(w, r, err)
		return sus, false
	}
	if sus.Status != store.StatusPending {
		h.writeError(w, r, http.StatusConflict, "already_resolved",
			fmt.Sprintf("suspension %s is %s", suspendID, sus.Status))
		return sus, false
	}
	return sus, true
}

// suspension looks suspendID up in the runner's index. An ID no store can
// hold (store.ValidID) is unknown without asking.
func (h *Handler) suspension(r *http.Request, suspendID string) (store.Suspension, error) {
	if err := store.CheckID(suspendID); err != nil {
		return store.Suspension{}, fmt.Errorf("%w: %w", instance.ErrUnknownSuspendID, err)
	}
	return h.runner.Suspension(r.Context(), suspendID)
}

// finish drains a run and answers with its summary, or with the error that
// ended it.
func (h *Handler) finish(w http.ResponseWriter, r *http.Request, machineID string, run iter.Seq2[machine.Step, error], attrs ...slog.Attr) {
	var steps []machine.Step
	for st, err := range run {
		if err != nil {
			attrs = append(attrs, slog.String("machine", machineID), slog.Int("steps", len(steps)))
			h.fail(w, r, err, attrs...)
			return
		}
		steps = append(steps, st)
	}
	h.summary(w, r, machineID, steps, attrs...)
}

// summary answers 200 with the Summary of a run's steps.
func (h *Handler) summary(w http.ResponseWriter, r *http.Request, machineID string, steps []machine.Step, attrs ...slog.Attr) {
	sum := summarize(machineID, steps, func(name string, err error) {
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "resumehttp: command value does not encode",
			slog.String("command", name), slog.String("error", err.Error()))
	})
	attrs = append(attrs, slog.String("machine", machineID), slog.Int("steps", len(steps)),
		slog.Bool("done", sum.Done), slog.Int("pending", len(sum.Pending)))
	h.writeJSON(w, r, http.StatusOK, sum, attrs...)
}

// summarize condenses the steps of a run.
func summarize(machineID string, steps []machine.Step, badValue func(string, error)) Summary {
	sum := Summary{MachineID: machineID, Steps: make([]string, 0, len(steps)), Pending: []string{}, Done: true}
	for _, st := range steps {
		sum.Steps = append(sum.Steps, string(st.Reason))
		for _, msgs := range [][]message.Message{st.Messages, st.Held} {
			for _, m := range msgs {
				if m.Role == message.Assistant {
					if t := m.Text(); t != "" {
						sum.Text = t
					}
				}
			}
		}
		if st.Command != nil && sum.Command == nil {
			c := &CommandResult{Name: st.Command.Name, InstanceID: st.Command.InstanceID}
			if st.Command.Suspension != nil {
				c.SuspendID = st.Command.Suspension.SuspendID
			} else if v, err := json.Marshal(st.Command.Value); err != nil {
				badValue(c.Name, err)
			} else {
				c.Value = v
			}
			sum.Command = c
		}
	}
	if n := len(steps); n > 0 {
		last := steps[n-1]
		sum.Done = last.Done
		for _, c := range last.Suspensions {
			sum.Pending = append(sum.Pending, c.SuspendID)
		}
	}
	return sum
}

// payloadOf returns raw as a payload or input: nil, no value at all, when
// it is absent or JSON null (a nil json.RawMessage in an any would not be
// nil).
func payloadOf(raw json.RawMessage) any {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	return raw
}

// decode decodes the verified body into v, strictly: no unknown fields, no
// trailing data. An empty body leaves v as it is. It answers 400 and
// returns false when the body is malformed.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, _ := r.Context().Value(bodyKey{}).([]byte)
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("data after the JSON value")
	}
	if err != nil {
		h.writeError(w, r, http.StatusBadRequest, "bad_request", "malformed JSON body: "+err.Error())
		return false
	}
	return true
}
