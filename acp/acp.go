// Package acp serves a charter as an Agent Client Protocol (ACP) agent:
// the JSON-RPC protocol editors such as Zed use to talk to coding agents,
// over a pair of streams (stdio, for an agent the editor starts). Each ACP
// session is a durable machine of a durable.Runner — the session ID is
// the machine ID — so a session outlives the connection and the process,
// and session/load finds it again from any process that shares the store.
//
// What the agent serves:
//
//   - initialize, declaring loadSession and, in agentCapabilities._meta,
//     the suspend capabilities of the draft RFC (supportsSuspend,
//     supportsAwaitResumption, resumeCauses);
//   - session/new (a machine at Config.Node), session/load (the history
//     re-emitted as session/update), the standard session/resume
//     (reattach, and wake a parked session), session/cancel;
//   - session/prompt, streaming the run's machine.Event values as
//     agent_message_chunk, agent_thought_chunk, tool_call and
//     tool_call_update updates;
//   - a tool suspension whose resume payload is a yes/no
//     (IsYesNo) becomes session/request_permission, and the answer
//     resumes it in the same turn; any other tool suspension is a pending
//     tool call carrying its reason and handle;
//   - the draft RFC's verbs, as extension methods (MethodSuspend,
//     MethodResume, MethodAwaitResumption, MethodUpdate): a client
//     suspends a session in one of three modes with resume conditions, a
//     node or tool that parks itself is announced with
//     session/await_resumption, a resume feeds an input and may start a
//     fresh turn (continueTranscript false), and suspended / resumed
//     updates report who parked the session and what woke it.
//
// docs/ACP.md lists the exact wire messages. The markov command line
// serves a charter with "markov acp".
package acp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/markov-agents/markov/durable"
)

// DefaultWatchInterval is how often, when Config.WatchInterval is zero, a
// parked session is checked for a resume that happened elsewhere (a
// signal from another process, a deadline, an HTTP resume) when the
// store has no event feed (it is not a store.EventLog).
const DefaultWatchInterval = 200 * time.Millisecond

// Config configures an Agent.
type Config struct {
	// Runner keeps and runs the sessions' machines. Required.
	Runner *durable.Runner
	// Node is the node a new session's machine starts at. Required.
	Node string
	// State is a new session's initial state (nil: the node's own).
	State any
	// Name and Version describe the agent in initialize's agentInfo
	// (Name defaults to the charter's name, Version to "dev").
	Name, Version string
	// WatchInterval is how often a parked session on an open connection
	// is checked for a resume that happened elsewhere when the store has
	// no event feed (DefaultWatchInterval if zero). On a store that is a
	// store.EventLog (memstore, sqlite, postgres) the check follows the
	// machine's event log (durable.Runner.Watch) instead: it runs when a
	// suspension of the session is resolved or its run moves on, and
	// this interval is not used.
	WatchInterval time.Duration
	// Logger receives what the agent does (silent if nil).
	Logger *slog.Logger
}

// Agent serves ACP connections. It is safe for concurrent use: several
// connections may be served at once, and several agents in several
// processes may share one store.
type Agent struct {
	cfg Config
	log *slog.Logger
}

// New returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Runner == nil {
		return nil, fmt.Errorf("%w: no Runner", ErrInvalidConfig)
	}
	if cfg.Node == "" {
		return nil, fmt.Errorf("%w: no Node", ErrInvalidConfig)
	}
	if cfg.Runner.Charter().Node(cfg.Node) == nil {
		return nil, fmt.Errorf("%w: the charter has no node %q", ErrInvalidConfig, cfg.Node)
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Runner.Charter().Name()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.WatchInterval <= 0 {
		cfg.WatchInterval = DefaultWatchInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Agent{cfg: cfg, log: log}, nil
}

// Serve serves one ACP client that writes its messages to in and reads
// the agent's from out (an editor's pipes: the process's stdin and
// stdout), until the client closes in or ctx is done. It returns nil when
// the client hung up, ctx.Err() otherwise. Runs in flight are cancelled
// when it returns; what they saved stays saved.
func (a *Agent) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := newConn(ctx, a)
	// The sdk's connection reads in at once, and handles each request as
	// it comes: it reads nothing until the agent is set up, so that no
	// handler finds c.sdk (or the sdk its connection and logger) unset.
	ready := make(chan struct{})
	c.sdk = acpsdk.NewAgentSideConnection(c, out, readAfter{ready: ready, r: in})
	c.sdk.SetLogger(a.log)
	close(ready)
	defer c.close()
	select {
	case <-c.sdk.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readAfter reads r once ready is closed.
type readAfter struct {
	ready <-chan struct{}
	r     io.Reader
}

// Read implements io.Reader.
func (r readAfter) Read(p []byte) (int, error) {
	<-r.ready
	return r.r.Read(p)
}
