package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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
	allowPrivate := fs.Bool("allow-private-push", false, "let push notifications go to loopback, private and other non-public addresses (refused by default, against SSRF)")
	var push a2aPushFlag
	push.register(fs)
	if _, err := c.ParseArgs(fs, "a2a", args, 0, 0, ""); err != nil {
		return err
	}
	if *nodeName == "" {
		return Usagef("a2a", "--node is required")
	}
	if *sweep < 0 {
		return Usagef("a2a", "--sweep must not be negative")
	}
	if err := push.check("a2a"); err != nil {
		return err
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
		Card: a2a.Card{Name: c.name(), Version: c.versionInfo().Version, URL: *url}, AllowPrivatePush: *allowPrivate})
	if err != nil {
		return err
	}
	h := push.mount(c, db, srv)
	return c.serving(ctx, db, *sweep, func(ctx context.Context) error {
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Run(ctx) }() // push notifications, tasks decided elsewhere
		defer func() { <-done }()
		return serveHTTP(ctx, c, *addr, "A2A (agent card, JSON-RPC at /, HTTP+JSON at /rest)", h)
	})
}

// a2aPushFlag is the --a2a-push flag of serve and a2a: where remote A2A
// agents post the push notifications of the tasks this process's
// remote-agent tools (a2a.Tool) wait on.
type a2aPushFlag struct{ path string }

func (f *a2aPushFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "a2a-push", "", "receive remote A2A agents' push notifications at `path` (for example /a2a/push, what the tools' a2a.Config.PushURL names; off if empty): each wakes the call waiting on its task, authenticated by the task's token")
}

// check checks the flag of command cmd.
func (f *a2aPushFlag) check(cmd string) error {
	if f.path != "" && (!strings.HasPrefix(f.path, "/") || strings.HasSuffix(f.path, "/")) {
		return Usagef(cmd, "--a2a-push %q: want a path like /a2a/push", f.path)
	}
	return nil
}

// mount returns next with a2a.PushHandler at the flag's path (next
// alone when it is off): on a fleet, a notification queues the wake-up
// for a worker; on SQLite it runs the machine.
func (f *a2aPushFlag) mount(c *CLI, db *DB, next http.Handler) http.Handler {
	if f.path == "" {
		return next
	}
	var s a2a.Signaler = db.Runner
	if db.Fleet != nil {
		s = db.Fleet
	}
	fmt.Fprintf(c.Out(), "A2A push notifications in at %s\n", f.path)
	return routeAt(f.path, a2a.PushHandler(s, c.Logger), next)
}
