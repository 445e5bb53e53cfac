package a2a

// This file is the server direction: a charter served as an A2A agent.

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/store"
)

// ResumedBy is the attribution (instance.Event.By) of the resumes and
// cancellations an A2A client's messages make.
const ResumedBy = "a2a"

// The paths of the bindings under the server's base URL.
const (
	// JSONRPCPath is where the JSON-RPC binding answers (POST).
	JSONRPCPath = "/"
	// RESTPath is the prefix of the HTTP+JSON binding's routes.
	RESTPath = "/rest"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Runner runs the machines the server serves. Required.
	Runner *durable.Runner
	// Node is the node a new context's machine starts at. Required.
	Node string
	// Records keeps the tasks and push notification configurations:
	// the store the Runner keeps its machines in (every store of this
	// module is a store.RecordKeeper). Required.
	Records store.RecordKeeper
	// Card overrides parts of the agent card generated from the charter.
	Card Card
	// PushSender sends push notifications as the SDK makes them. Nil
	// means the server's outbox: each notification is kept in Records and
	// delivered by Run, with retries (PushAttempts, PushBackoff), from
	// whichever process on the store runs it — a restart loses none.
	PushSender push.Sender
	// AllowPrivatePush lets push notification URLs name, or resolve to,
	// loopback, private, link-local and other non-public addresses: they
	// are refused by default (a push config naming one is invalid params,
	// a delivery to a name resolving to one is dropped), as a defence
	// against SSRF.
	AllowPrivatePush bool
	// PushAttempts is how many times the outbox tries a notification
	// (DefaultPushAttempts if zero); PushBackoff the wait before the
	// second attempt, doubled for each next one (DefaultPushBackoff if
	// zero).
	PushAttempts int
	PushBackoff  time.Duration
	// RunInterval is how often Run looks at the outbox and at the tasks
	// waiting on decisions made elsewhere (DefaultRunInterval if zero).
	RunInterval time.Duration
	// Logger receives what the SDK and the server log (nothing when nil).
	Logger *slog.Logger
}

// Card is what a ServerConfig overrides of the generated agent card. A
// zero field keeps the generated value.
type Card struct {
	// Name is the agent's name (the charter's name).
	Name string
	// Description says what the agent does (one naming the charter).
	Description string
	// Version is the agent's version ("(devel)").
	Version string
	// URL is the base URL clients reach the server at, without a
	// trailing slash ("http://" and each request's Host when empty).
	URL string
	// Provider is the organisation that runs the agent (none).
	Provider *a2a.AgentProvider
	// DocumentationURL points at the agent's documentation (none).
	DocumentationURL string
	// Skills replace the generated skills (one per node reachable from
	// the start node, one per command).
	Skills []a2a.AgentSkill
}

// Server serves a charter as an A2A agent: the agent card at
// /.well-known/agent-card.json, the JSON-RPC binding at JSONRPCPath and
// the HTTP+JSON binding under RESTPath. It is an http.Handler, safe for
// concurrent use; every process on the same store serves every task.
type Server struct {
	runner  *durable.Runner
	node    string
	bridge  *bridge.Bridge
	card    a2a.AgentCard
	baseURL string
	logger  *slog.Logger
	handler a2asrv.RequestHandler
	tasks   taskStore
	pushes  pushStore
	outbox  *outbox
	sender  push.Sender
	every   time.Duration
	mux     *http.ServeMux
	// following are the tasks whose executions follow their machines in
	// this process (task ID to struct{}): Run leaves them alone.
	following sync.Map
}

// NewServer returns the server of cfg, or an error wrapping
// ErrInvalidConfig.
func NewServer(cfg ServerConfig) (*Server, error) {
	switch {
	case cfg.Runner == nil:
		return nil, fmt.Errorf("%w: no Runner", ErrInvalidConfig)
	case cfg.Records == nil:
		return nil, fmt.Errorf("%w: no Records", ErrInvalidConfig)
	case cfg.Node == "" || cfg.Runner.Charter().Node(cfg.Node) == nil:
		return nil, fmt.Errorf("%w: Node %q is not a node of charter %s", ErrInvalidConfig, cfg.Node, cfg.Runner.Charter().Name())
	case cfg.PushAttempts < 0 || cfg.PushBackoff < 0 || cfg.RunInterval < 0:
		return nil, fmt.Errorf("%w: PushAttempts, PushBackoff and RunInterval must not be negative", ErrInvalidConfig)
	}
	// The bridge's continuation tokens never leave the server (a task's
	// suspensions are in its stored status), so the secret is this
	// process's own.
	secret := make([]byte, bridge.MinSecret)
	rand.Read(secret)
	b, err := bridge.New(bridge.Config{Runner: cfg.Runner, Secret: secret})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	check := func(url string) error { return checkURL("push notification URL", url, cfg.AllowPrivatePush) }
	client := guardedClient(pushTimeout)
	if cfg.AllowPrivatePush {
		client = &http.Client{Timeout: pushTimeout}
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s := &Server{runner: cfg.Runner, node: cfg.Node, bridge: b, logger: logger,
		baseURL: strings.TrimSuffix(cfg.Card.URL, "/"), tasks: taskStore{cfg.Records},
		pushes: pushStore{records: cfg.Records, check: check}, every: cmp.Or(cfg.RunInterval, DefaultRunInterval),
		outbox: &outbox{records: cfg.Records, client: client, checkTarget: check, logger: logger, now: time.Now,
			attempts: cmp.Or(cfg.PushAttempts, DefaultPushAttempts), backoff: cmp.Or(cfg.PushBackoff, DefaultPushBackoff),
			added: make(chan struct{}, 1)}}
	s.card = s.generateCard(cfg.Card)
	s.sender = s.outbox
	if cfg.PushSender != nil {
		s.sender = cfg.PushSender
	}
	s.handler = storedHandler{s: s, RequestHandler: a2asrv.NewHandler(executor{s},
		a2asrv.WithTaskStore(s.tasks),
		a2asrv.WithPushNotifications(s.pushes, s.sender),
		a2asrv.WithCapabilityChecks(&s.card.Capabilities),
		a2asrv.WithCallInterceptors(checker{s}),
		a2asrv.WithLogger(logger),
	)}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET "+a2asrv.WellKnownAgentCardPath, s.serveCard)
	s.mux.Handle(RESTPath+"/", http.StripPrefix(RESTPath, a2asrv.NewRESTHandler(s.handler)))
	s.mux.Handle(JSONRPCPath, a2asrv.NewJSONRPCHandler(s.handler))
	return s, nil
}

// ServeHTTP serves the agent card and both bindings.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// RequestHandler is the SDK's request handler of the server, to mount
// on another transport (gRPC: a2agrpc).
func (s *Server) RequestHandler() a2asrv.RequestHandler { return s.handler }

// Card returns the agent card, its interfaces at base URL base.
func (s *Server) Card(base string) *a2a.AgentCard {
	c := s.card
	base = strings.TrimSuffix(cmp.Or(s.baseURL, base), "/")
	c.SupportedInterfaces = []*a2a.AgentInterface{
		a2a.NewAgentInterface(base+JSONRPCPath, a2a.TransportProtocolJSONRPC),
		a2a.NewAgentInterface(base+RESTPath, a2a.TransportProtocolHTTPJSON),
	}
	return &c
}

// serveCard serves the card, its URLs on the request's host when the
// config names no URL.
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	a2asrv.NewStaticAgentCardHandler(s.Card(scheme+"://"+r.Host)).ServeHTTP(w, r)
}

// generateCard is the card of the runner's charter with over's fields.
func (s *Server) generateCard(over Card) a2a.AgentCard {
	charter := s.runner.Charter()
	c := a2a.AgentCard{
		Name:               cmp.Or(over.Name, charter.Name()),
		Description:        cmp.Or(over.Description, "The markov charter "+charter.Name()+", served over A2A: a context is a durable machine, a task the work one message starts."),
		Version:            cmp.Or(over.Version, "(devel)"),
		Provider:           over.Provider,
		DocumentationURL:   over.DocumentationURL,
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             over.Skills,
	}
	if c.Skills == nil {
		c.Skills = s.skills()
	}
	return c
}

// skills are a skill per node reachable from the start node, then one
// per command of the charter.
func (s *Server) skills() []a2a.AgentSkill {
	charter := s.runner.Charter()
	var out []a2a.AgentSkill
	seen := map[string]bool{}
	queue := []string{s.node}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		n := charter.Node(name)
		if n == nil || seen[name] {
			continue
		}
		seen[name] = true
		desc, _, _ := strings.Cut(strings.TrimSpace(n.Instructions()), "\n")
		out = append(out, a2a.AgentSkill{ID: "node:" + name, Name: name, Tags: []string{"node"},
			Description: cmp.Or(desc, "The node "+name+".")})
		for _, e := range n.Edges() {
			queue = append(queue, e.Target)
		}
	}
	for _, d := range charter.Commands() {
		out = append(out, a2a.AgentSkill{ID: "command:" + d.Name, Name: d.Name, Tags: []string{"command"},
			Description: cmp.Or(d.Description, "The command "+d.Name+".")})
	}
	return out
}

// MachineID is the machine of A2A context contextID: the same context
// names the same machine in every process.
func MachineID(contextID string) string {
	sum := sha256.Sum256([]byte(contextID))
	return "a2a_" + hex.EncodeToString(sum[:16])
}

// checker refuses, before the SDK records anything, a message on a task
// that cannot answer it.
type checker struct{ s *Server }

// Before implements a2asrv.CallInterceptor.
func (c checker) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	send, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || send == nil || send.Message == nil || send.Message.TaskID == "" {
		return ctx, nil, nil
	}
	return ctx, nil, c.s.check(ctx, send.Message)
}

// After implements a2asrv.CallInterceptor.
func (checker) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }
