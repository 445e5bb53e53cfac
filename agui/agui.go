// Package agui serves durable machines to AG-UI frontends: an
// http.Handler that takes AG-UI 1.0's RunAgentInput (a thread is a
// durable machine, a run one durable run) and streams the run as AG-UI
// events over Server-Sent Events — RUN_STARTED, the model's text as
// TEXT_MESSAGE_START/CONTENT/END as it streams, tool calls as
// TOOL_CALL_START/ARGS/END and TOOL_CALL_RESULT, the machine's state as
// STATE_SNAPSHOT and STATE_DELTA (JSON Patch), each round as
// STEP_STARTED/STEP_FINISHED, and RUN_FINISHED or RUN_ERROR.
//
// A run that suspends ends with RUN_FINISHED whose outcome is an
// interrupt per pending suspension (id = suspend ID, message = reason,
// toolCallId, responseSchema = the payload schema), made by the protocol
// layer's one suspension bridge; the next input's resume entries answer
// them, each checked against its schema before anything is applied. The
// run goes on when the client goes away: its events are read from the
// machine's durable event log, which a client that reconnects (a GET
// with Last-Event-ID) reads on from where it stopped. See docs/AG-UI.md.
package agui

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/store"
)

// Defaults of Config.
const (
	// DefaultHeartbeat is how often an idle stream sends a comment line
	// when Config.Heartbeat is zero.
	DefaultHeartbeat = 15 * time.Second
	// DefaultMaxBody is the largest RunAgentInput accepted, in bytes,
	// when Config.MaxBody is zero.
	DefaultMaxBody = 1 << 20
)

// ResumedBy is the attribution (instance.Event.By) of the answers of a
// request Config.Identity names no one for.
const ResumedBy = "agui"

// Config configures a Handler.
type Config struct {
	// Runner runs the machines; its store must keep an event log (every
	// store of this module does). Required.
	Runner *durable.Runner
	// Node is the node a new thread's machine starts at. Required.
	Node string
	// Auth authenticates every request but a CORS preflight: it serves
	// next when the request is allowed and answers it otherwise — the
	// signed requests of the HTTP API (resumehttp.Handler.Protect), or
	// any authentication of your own. Nil serves every request: only
	// behind an authentication of your own.
	Auth func(next http.Handler) http.Handler
	// Identity names who sends an authenticated request, for the
	// attribution of its answers (ResumedBy when nil or empty).
	Identity func(*http.Request) string
	// AllowOrigins are the origins of browser frontends allowed to call
	// the endpoint across origins (CORS), as "https://app.example.com";
	// "*" allows any. None when empty: same-origin pages only.
	AllowOrigins []string
	// Heartbeat is how often an idle stream sends a comment line
	// (DefaultHeartbeat if zero).
	Heartbeat time.Duration
	// MaxBody is the largest RunAgentInput accepted, in bytes
	// (DefaultMaxBody if zero).
	MaxBody int64
	// Logger receives the errors of runs and streams (silent if nil).
	Logger *slog.Logger
}

// Handler is the AG-UI endpoint. POST runs a RunAgentInput and streams
// its run; GET, with the query parameters threadId and runId and the
// Last-Event-ID header (or the query parameter after), streams a run
// still going from there. Mount it at any path. It is safe for
// concurrent use; Close stops the runs it started.
type Handler struct {
	runner    *durable.Runner
	node      string
	bridge    *bridge.Bridge
	inner     http.Handler
	identity  func(*http.Request) string
	origins   []string
	heartbeat time.Duration
	maxBody   int64
	log       *slog.Logger
	replays   store.ReplayGuard

	// ctx is the context of the runs, cancelled by Close.
	ctx  context.Context
	stop context.CancelFunc
	runs sync.WaitGroup

	mu sync.Mutex
	// live holds the runs in progress in this process, by thread.
	live map[string]*liveRun
}

// liveRun is a run this handler started.
type liveRun struct {
	done chan struct{}
	// err is the run's error, set before done is closed.
	err error
	// watching is closed when the stream of the request that started the
	// run watches the event log, so that it sees the first deltas live;
	// the run waits for it.
	watching chan struct{}
	once     sync.Once
}

// watched lets the run start.
func (lr *liveRun) watched() { lr.once.Do(func() { close(lr.watching) }) }

// New returns the handler of cfg, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Runner == nil:
		return nil, fmt.Errorf("%w: no Runner", ErrInvalidConfig)
	case cfg.Node == "" || cfg.Runner.Charter().Node(cfg.Node) == nil:
		return nil, fmt.Errorf("%w: Node %q is not a node of the charter", ErrInvalidConfig, cfg.Node)
	case !cfg.Runner.CanWatch():
		return nil, fmt.Errorf("%w: the runner's store keeps no event log", ErrInvalidConfig)
	case cfg.Heartbeat < 0 || cfg.MaxBody < 0:
		return nil, fmt.Errorf("%w: Heartbeat or MaxBody is negative", ErrInvalidConfig)
	}
	// The bridge signs continuation tokens, which AG-UI has no use for:
	// an interrupt's ID is its suspend ID, and the request's own
	// authentication stands for the token. A secret of its own keeps
	// the bridge's contract.
	b, err := bridge.New(bridge.Config{Runner: cfg.Runner, Secret: []byte(rand.Text() + rand.Text())})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	h := &Handler{
		runner: cfg.Runner, node: cfg.Node, bridge: b, identity: cfg.Identity,
		origins:   slices.Clone(cfg.AllowOrigins),
		heartbeat: cfg.Heartbeat, maxBody: cfg.MaxBody, log: cfg.Logger,
		replays: cfg.Runner.ReplayGuard(),
		ctx:     ctx, stop: stop, live: map[string]*liveRun{},
	}
	if h.heartbeat == 0 {
		h.heartbeat = DefaultHeartbeat
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBody
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.inner = http.HandlerFunc(h.route)
	if cfg.Auth != nil {
		h.inner = cfg.Auth(h.inner)
	}
	return h, nil
}

// Close cancels the runs the handler started and waits for them: each
// machine is left at its last save, and its next run continues it.
func (h *Handler) Close() {
	h.stop()
	h.runs.Wait()
}

// ServeHTTP answers a CORS preflight, and serves any other request
// behind Config.Auth.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cors(w, r) {
		return
	}
	h.inner.ServeHTTP(w, r)
}

// allowed reports whether origin may call the endpoint across origins.
func (h *Handler) allowed(origin string) bool {
	return origin != "" && (slices.Contains(h.origins, "*") || slices.Contains(h.origins, origin))
}

// cors sets the CORS headers of a request from an allowed origin, and
// answers a preflight (reporting true).
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	w.Header().Add("Vary", "Origin")
	if h.allowed(origin) {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		if preflight {
			w.Header().Set("Access-Control-Allow-Methods", "POST, GET, OPTIONS")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				w.Header().Set("Access-Control-Allow-Headers", req)
			}
			w.Header().Set("Access-Control-Max-Age", "600")
		}
	}
	if preflight {
		w.WriteHeader(http.StatusNoContent)
	}
	return preflight
}

// route serves an authenticated request.
func (h *Handler) route(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.run(w, r)
	case http.MethodGet:
		h.reconnect(w, r)
	default:
		w.Header().Set("Allow", "POST, GET, OPTIONS")
		http.Error(w, r.Method+" is not allowed here (allowed: POST, GET, OPTIONS)", http.StatusMethodNotAllowed)
	}
}

// by is the attribution of r's answers.
func (h *Handler) by(r *http.Request) string {
	if h.identity != nil {
		if who := h.identity(r); who != "" {
			return who
		}
	}
	return ResumedBy
}

// run serves POST: it checks the input, starts its run and streams it.
// A refused input is a stream of one RUN_ERROR, and changes nothing.
func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		newStream(w, h.heartbeat).refuse(fmt.Errorf("%w: body: %w", ErrInvalidInput, err))
		return
	}
	in, err := DecodeInput(body)
	if err != nil {
		newStream(w, h.heartbeat).refuse(err)
		return
	}
	lr, after, err := h.start(r.Context(), in, h.by(r))
	if err != nil {
		h.logError(r.Context(), "refused", in.ThreadID, err)
		newStream(w, h.heartbeat).refuse(err)
		return
	}
	h.follow(w, r, in.ThreadID, in.RunID, after, lr)
}

// reconnect serves GET: the events of thread threadId's run from the
// client's last event ID on.
func (h *Handler) reconnect(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	thread, runID := q.Get("threadId"), q.Get("runId")
	pos := r.Header.Get("Last-Event-ID")
	if pos == "" {
		pos = q.Get("after")
	}
	after, err := strconv.ParseInt(cmpOr(pos, "0"), 10, 64)
	switch {
	case !store.ValidID(thread):
		err = fmt.Errorf("%w: threadId: not a valid ID", ErrInvalidInput)
	case runID == "":
		err = fmt.Errorf("%w: runId is required", ErrInvalidInput)
	case err != nil || after < 0:
		err = fmt.Errorf("%w: Last-Event-ID: not a non-negative integer", ErrInvalidInput)
	}
	if err != nil {
		newStream(w, h.heartbeat).refuse(err)
		return
	}
	h.mu.Lock()
	lr := h.live[thread]
	h.mu.Unlock()
	h.follow(w, r, thread, runID, after, lr)
}

// cmpOr is s, or def when s is empty.
func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (h *Handler) logError(ctx context.Context, what, thread string, err error) {
	h.log.LogAttrs(ctx, slog.LevelInfo, "agui: "+what, slog.String("thread", thread), slog.String("error", err.Error()))
}

// isBusy reports whether a run holds thread, in this process or another.
func (h *Handler) isBusy(ctx context.Context, thread string) (bool, error) {
	st, err := h.runner.Status(ctx, thread)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return st.State == durable.StateRunning, nil
}

// escape is s as a JSON Pointer reference token (RFC 6901).
func escape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
