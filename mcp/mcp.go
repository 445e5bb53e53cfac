// Package mcp mounts the tools of Model Context Protocol servers in
// markov nodes, through the official Go SDK's client: a server reached
// over stdio (a command) or Streamable HTTP (a URL, with headers or a
// bearer token) lends its tools to a node, each a markov tool whose name
// is prefixed per server and whose input is validated against the
// server's schema before the call.
//
// When a server asks for input in the middle of a call — an elicitation,
// or a multi round-trip input_required result — the markov call suspends
// like any other: its reason is the server's message, its payload schema
// the requested schema, its metadata an InputMetadata naming the server
// and the request (with the server's requestState), so the answer may
// come hours later, from another process. The answer goes back to the
// server and the tool's result is what the server then returns. See
// docs/MCP.md.
//
// Faults of a server — it exits, hangs past the call timeout, breaks the
// protocol, refuses the call, returns too much — are error results the
// model sees; the client connects again on the next call.
//
// The other direction, NewServer serves a charter to MCP clients: a
// conversation tool and one tool per command. A run that suspends
// answers input_required, a form elicitation per pending suspension and
// a signed requestState; the client's retry resumes the suspensions,
// each answer checked against its schema first, and continues the run.
package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/llm"

	"github.com/markov-agents/markov/node"
)

// Defaults of Config's zero fields.
const (
	DefaultCallTimeout = 2 * time.Minute
	DefaultMaxResult   = 1 << 20
)

// mrtrVersion is the first protocol version whose servers ask for input
// in the call's result (multi round-trip requests) rather than with a
// request of their own while the call is open.
const mrtrVersion = "2026-07-28"

// Config says how to reach one MCP server. Set Command (stdio) or URL
// (Streamable HTTP), not both.
type Config struct {
	// Name names the server in tool names, metadata and logs: a valid
	// node.ValidName. Required.
	Name string
	// Prefix is put before the server's tool names to make the markov
	// tool names (Name + "_" if empty); NoPrefix keeps the server's
	// names as they are.
	Prefix   string
	NoPrefix bool

	// Command is the server's command line (stdio transport), with Env
	// (added to this process's environment) and Dir.
	Command []string
	Env     []string
	Dir     string

	// URL is the server's Streamable HTTP endpoint, called with Header,
	// and with "Authorization: Bearer <Bearer>" when Bearer is set.
	// HTTPClient is http.DefaultClient if nil.
	URL        string
	Header     http.Header
	Bearer     string
	HTTPClient *http.Client

	// ProtocolVersion, when set, is the protocol version the client asks
	// for (the latest the SDK speaks if empty).
	ProtocolVersion string
	// CallTimeout bounds every request to the server: a call that has no
	// answer by then is an error result, and the connection is dropped
	// (DefaultCallTimeout if zero).
	CallTimeout time.Duration
	// MaxResult is the size, in bytes, of the largest tool result taken
	// from the server (DefaultMaxResult if zero); a larger one is an error
	// result.
	MaxResult int
	// Approve, when set, selects the tools whose every call first asks a
	// person: the call suspends (InputMetadata.Mode ModeApproval, an
	// Approval as payload) and reaches the server only once approved; a
	// refusal is an error result. nil calls every tool straight away.
	// (t.Annotations.DestructiveHint is the server's own hint.)
	Approve func(t *sdk.Tool) bool
	// Sampling, when set, answers the server's sampling requests
	// (sampling/createMessage, during a call or as an input request):
	// the charter's model, for a charter that lets its MCP servers use
	// it. Text messages only, no tools; the model's text is the answer.
	// nil declares no sampling, and a request is refused.
	Sampling llm.Model
	// Signaler, when set, completes URL elicitations: the server's
	// notifications/elicitation/complete signals URLEvent(Name, its
	// elicitation ID), which resumes the suspension waiting for it (an
	// explicit resume still works). A *durable.Runner is one.
	Signaler Signaler
	// Logger receives the client's log and a stdio server's stderr, line
	// by line (slog.Default() if nil).
	Logger *slog.Logger
}

// Signaler signals a named event to the suspensions waiting for it
// (durable.Runner.Signal).
type Signaler interface {
	Signal(ctx context.Context, event string, payload any) (woken int, err error)
}

// URLEvent is the event a URL-mode elicitation of server's, with
// elicitation ID id, waits for besides a resume: a signal of it
// completes the elicitation (accept). Config.Signaler sends it when the
// server notifies the elicitation complete.
func URLEvent(server, id string) string {
	return "mcp.elicitation.complete:" + server + ":" + id
}

// Client is a connection to one MCP server, made when first needed and
// made again after a fault. One Client serves every machine of the
// process; it is safe for concurrent use.
type Client struct {
	cfg    Config
	log    *slog.Logger
	client *sdk.Client

	mu      sync.Mutex
	session *sdk.ClientSession
	tools   map[string]*sdk.Tool // the server's tools by name; nil: list again
	// changes counts list_changed notifications, so that a list taken
	// while one arrived is not kept.
	changes int
	// open is the legacy-protocol call in progress, which a server's
	// elicitation request belongs to: such calls take legacy in turn.
	legacy sync.Mutex
	open   atomic.Pointer[replay]
	// signals are the completions being signalled (Close waits for them).
	signals sync.WaitGroup
}

// completed signals the completion of a URL elicitation the server
// notified, on a goroutine of its own: the run it resumes may call this
// server again.
func (c *Client) completed(ctx context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
	if req.Params == nil || req.Params.ElicitationID == "" {
		return
	}
	ev := URLEvent(c.cfg.Name, req.Params.ElicitationID)
	ctx = context.WithoutCancel(ctx)
	c.signals.Go(func() {
		n, err := c.cfg.Signaler.Signal(ctx, ev, map[string]any{"completed": true})
		if err != nil {
			c.log.Warn("mcp: complete a URL elicitation", "elicitation", req.Params.ElicitationID, "error", err)
			return
		}
		c.log.Info("mcp: URL elicitation completed", "elicitation", req.Params.ElicitationID, "resumed", n)
	})
}

// New returns a client of the server cfg describes; it connects on first
// use. A Config it cannot use fails with ErrInvalidConfig.
func New(cfg Config) (*Client, error) {
	switch {
	case !node.ValidName(cfg.Name):
		return nil, fmt.Errorf("%w: Name %q is not a valid name", ErrInvalidConfig, cfg.Name)
	case (len(cfg.Command) == 0) == (cfg.URL == ""):
		return nil, fmt.Errorf("%w: server %s: set Command or URL, not both", ErrInvalidConfig, cfg.Name)
	case cfg.CallTimeout < 0 || cfg.MaxResult < 0:
		return nil, fmt.Errorf("%w: server %s: CallTimeout and MaxResult must not be negative", ErrInvalidConfig, cfg.Name)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxResult == 0 {
		cfg.MaxResult = DefaultMaxResult
	}
	if cfg.Prefix == "" && !cfg.NoPrefix {
		cfg.Prefix = cfg.Name + "_"
	}
	c := &Client{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.log = c.log.With("mcp_server", cfg.Name)
	opts := &sdk.ClientOptions{
		Logger:                 c.log,
		ElicitationHandler:     c.elicit,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { c.forgetTools() },
		MultiRoundTrip:         &sdk.MultiRoundTripOptions{Disabled: true},
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{
			Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{},
		}},
	}
	if cfg.Signaler != nil {
		opts.ElicitationCompleteHandler = c.completed
	}
	if cfg.Sampling != nil {
		opts.CreateMessageHandler = c.sampleLegacy
		opts.Capabilities.Sampling = &sdk.SamplingCapabilities{}
	}
	c.client = sdk.NewClient(&sdk.Implementation{Name: "markov", Version: "1"}, opts)
	return c, nil
}

// Name returns the server's name (Config.Name).
func (c *Client) Name() string { return c.cfg.Name }

// Close ends the connection, if any (a stdio server is stopped), after
// the URL elicitations completed meanwhile are signalled.
func (c *Client) Close() error {
	c.signals.Wait()
	c.mu.Lock()
	cs := c.session
	c.session, c.tools = nil, nil
	c.mu.Unlock()
	if cs == nil {
		return nil
	}
	return cs.Close()
}

// connect returns the session, connecting first when there is none.
func (c *Client) connect(ctx context.Context) (*sdk.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	cs, err := c.client.Connect(ctx, c.transport(), &sdk.ClientSessionOptions{ProtocolVersion: c.cfg.ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: connect: %v", ErrServer, c.cfg.Name, err)
	}
	c.session, c.tools = cs, nil
	return cs, nil
}

// transport returns a new transport to the server.
func (c *Client) transport() sdk.Transport {
	if c.cfg.URL != "" {
		hc := c.cfg.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		if len(c.cfg.Header) > 0 || c.cfg.Bearer != "" {
			h := c.cfg.Header.Clone()
			if h == nil {
				h = http.Header{}
			}
			if c.cfg.Bearer != "" {
				h.Set("Authorization", "Bearer "+c.cfg.Bearer)
			}
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			cp := *hc
			cp.Transport = headers{h, base}
			hc = &cp
		}
		return &sdk.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc, MaxRetries: -1}
	}
	cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
	cmd.Env = append(cmd.Environ(), c.cfg.Env...)
	cmd.Dir = c.cfg.Dir
	cmd.Stderr = &logWriter{log: c.log}
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}
}

// logWriter logs what a stdio server writes to its stderr, a line at a
// time (a line over maxLogLine bytes in pieces).
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

const maxLogLine = 64 << 10

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 && len(w.buf) < maxLogLine {
			break
		}
		if i < 0 {
			i = len(w.buf)
		}
		w.log.Info("mcp server stderr", "line", string(w.buf[:i]))
		w.buf = w.buf[min(i+1, len(w.buf)):]
	}
	return len(p), nil
}

// headers adds h to every request.
type headers struct {
	h    http.Header
	base http.RoundTripper
}

func (t headers) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.h {
		req.Header[k] = v
	}
	return t.base.RoundTrip(req)
}

// drop ends the session cs after a fault, unless another took its place,
// so the next call connects again. Closing waits for a stdio server to
// exit, so it runs on its own.
func (c *Client) drop(cs *sdk.ClientSession, why error) {
	c.mu.Lock()
	if c.session != cs {
		c.mu.Unlock()
		return
	}
	c.session, c.tools = nil, nil
	c.mu.Unlock()
	c.log.Warn("mcp server connection dropped", "err", why)
	go func() { _ = cs.Close() }()
}

// forgetTools makes the next use list the server's tools again.
func (c *Client) forgetTools() {
	c.mu.Lock()
	c.tools = nil
	c.changes++
	c.mu.Unlock()
	c.log.Debug("mcp tool list changed")
}

// list returns the server's tools, listing them when the list is not
// known (first use, a reconnection, a list_changed notification).
func (c *Client) list(ctx context.Context) (*sdk.ClientSession, map[string]*sdk.Tool, error) {
	cs, err := c.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	tools, changes := c.tools, c.changes
	c.mu.Unlock()
	if tools != nil {
		return cs, tools, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	tools = map[string]*sdk.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			err = c.fault(cs, "list tools", err)
			return nil, nil, err
		}
		tools[t.Name] = t
	}
	c.mu.Lock()
	if c.session == cs && c.changes == changes {
		c.tools = tools
	}
	c.mu.Unlock()
	return cs, tools, nil
}

// fault turns err, met doing what on session cs, into an ErrServer, and
// drops the session unless the server only refused the request (a
// JSON-RPC error leaves the connection sound).
func (c *Client) fault(cs *sdk.ClientSession, what string, err error) error {
	if _, refused := errors.AsType[*jsonrpc.Error](err); !refused {
		c.drop(cs, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %s: no answer within %s", ErrServer, c.cfg.Name, what, c.cfg.CallTimeout)
	}
	return fmt.Errorf("%w: %s: %s: %v", ErrServer, c.cfg.Name, what, err)
}
