package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/store"
)

// A2A serves the charter as an Agent2Agent agent over HTTP at --addr:
// the agent card at /.well-known/agent-card.json, the JSON-RPC binding
// at / and the HTTP+JSON binding under /rest. A context is a machine
// (new ones start at --node), a task the work one message starts; a run
// that suspends makes its task input-required, or auth-required when the
// suspension is decided elsewhere (markov serve's HTTP API or console,
// markov resume). Tasks live in the database, so any process on it
// serves any task.
func A2A(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("a2a")
	addr := fs.String("addr", "127.0.0.1:8090", "serve on `host:port`")
	nodeName := fs.String("node", c.Node, "the `node` a new context's machine starts at")
	url := fs.String("url", "", "the base `URL` clients reach the server at, for the agent card (default: http:// and each request's host)")
	sweep := fs.Duration("sweep", time.Second, "on SQLite, how often to resolve expired suspensions (0: never); on PostgreSQL the fleet's workers do")
	if _, err := c.ParseArgs(fs, "a2a", args, 0, 0, ""); err != nil {
		return err
	}
	if *nodeName == "" {
		return Usagef("a2a", "--node is required")
	}
	if *sweep < 0 {
		return Usagef("a2a", "--sweep must not be negative")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(c.stderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	records, ok := db.Store.(store.RecordKeeper)
	if !ok {
		return fmt.Errorf("a2a: the store %s keeps no records", db.Name)
	}
	srv, err := a2a.NewServer(a2a.ServerConfig{Runner: db.Runner, Node: *nodeName, Records: records, Logger: c.Logger,
		Card: a2a.Card{Name: c.name(), Version: c.versionInfo().Version, URL: *url}})
	if err != nil {
		return err
	}
	return c.serving(ctx, db, *sweep, func(ctx context.Context) error {
		return serveHTTP(ctx, c, *addr, "A2A (agent card, JSON-RPC at /, HTTP+JSON at /rest)", srv)
	})
}
