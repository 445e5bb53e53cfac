package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/internal/bridge"
	"github.com/markov-agents/markov/mcp"
)

// MCP serves the charter to Model Context Protocol clients: on stdin and
// stdout (a client starts "markov mcp" and talks to it over its pipes),
// or over Streamable HTTP at --http ADDR in the SDK's stateless mode. The
// tools are the conversation tool (mcp.ConversationTool; new
// conversations start at --node) and one per command of the charter; a
// run that suspends answers input_required with a requestState signed
// with the secret in $MARKOV_MCP_SECRET (--secret-env), or with a secret
// of this process when it is unset. Over stdio nothing but the protocol is
// written to stdout; the log goes to stderr. A client that declares the
// tasks extension (io.modelcontextprotocol/tasks) gets a task for a call
// that suspends or runs longer than --task-wait; on SQLite the runs a stop
// cut short are continued at the start (durable.Runner.Recover).
func MCP(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("mcp")
	nodeName := fs.String("node", c.Node, "the `node` new conversations start at")
	addr := fs.String("http", "", "serve Streamable HTTP (stateless) on `host:port` instead of stdio")
	secretEnv := fs.String("secret-env", "MARKOV_MCP_SECRET", "the environment `variable` holding the secret that signs requestState (at least 32 bytes; unset: a secret of this process, so a state dies with it)")
	ttl := fs.Duration("state-ttl", bridge.DefaultTokenTTL, "how long a requestState stays good")
	taskWait := fs.Duration("task-wait", mcp.DefaultTaskWait, "how long a call of a client that declares the tasks extension runs before it is answered with a task (negative: at once)")
	poll := fs.Duration("poll-interval", mcp.DefaultPollInterval, "the polling interval a task suggests to its client")
	sweep := fs.Duration("sweep", time.Second, "on SQLite, how often to resolve expired suspensions (0: never); on PostgreSQL the fleet's workers do")
	if _, err := c.ParseArgs(fs, "mcp", args, 0, 0, ""); err != nil {
		return err
	}
	if *nodeName == "" {
		return Usagef("mcp", "--node is required")
	}
	if *sweep < 0 || *ttl < 0 || *poll < 0 {
		return Usagef("mcp", "--sweep, --state-ttl and --poll-interval must not be negative")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(c.stderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	secret := []byte(c.getenv(*secretEnv))
	switch {
	case len(secret) == 0:
		secret = make([]byte, bridge.MinSecret)
		rand.Read(secret)
		c.Logger.Warn("mcp: $" + *secretEnv + " is not set: requestState is signed with a secret of this process, and refused by any other")
	case len(secret) < bridge.MinSecret:
		return fmt.Errorf("$%s: %d bytes, want at least %d (for example: openssl rand -hex 32)", *secretEnv, len(secret), bridge.MinSecret)
	}
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	srv, err := mcp.NewServer(mcp.ServerConfig{Runner: db.Runner, Secret: secret, Node: *nodeName, Name: c.name(),
		Version: c.versionInfo().Version, TokenTTL: *ttl, Logger: c.Logger, TaskWait: *taskWait, PollInterval: *poll})
	if err != nil {
		return err
	}
	return c.serving(ctx, db, *sweep, func(ctx context.Context) error {
		if *addr == "" {
			return srv.Run(ctx, c.stdio())
		}
		return serveHTTP(ctx, c, *addr, "MCP (Streamable HTTP, stateless)", srv.Handler())
	}, srv.Close)
}

// serving runs serve until it returns or ctx is done and, beside it on
// SQLite (on PostgreSQL the fleet's workers do both), continues the runs
// a stop cut short and resolves expired suspensions every sweep (never
// when 0). Then it calls closers, cancels the runs still going and waits
// for them; it returns serve's error, or nil when a signal stopped the
// command.
func (c *CLI) serving(ctx context.Context, db *DB, sweep time.Duration, serve func(context.Context) error, closers ...func() error) error {
	signalled := ctx // done when a signal stops the command
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	if db.Fleet == nil {
		wg.Go(func() {
			c.recoverRuns(ctx, db)
			if sweep > 0 {
				_ = db.Runner.RunSweeper(ctx, sweep)
			}
		})
	}
	err := serve(ctx)
	stop()
	for _, closeFn := range closers {
		_ = closeFn()
	}
	_ = db.Runner.Wait(ctx)
	wg.Wait()
	if signalled.Err() != nil {
		return nil // stopped by a signal
	}
	return err
}

// serveHTTP serves h, what names it, on addr until ctx is done.
func serveHTTP(ctx context.Context, c *CLI, addr, what string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if c.onListen != nil {
		c.onListen(ln.Addr())
	}
	fmt.Fprintf(c.stderr(), "serving %s on http://%s\n", what, ln.Addr())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// stdio is the MCP transport on the CLI's stdin and stdout.
func (c *CLI) stdio() *sdk.IOTransport {
	return &sdk.IOTransport{Reader: io.NopCloser(c.stdin()), Writer: nopCloser{c.Out()}}
}

// nopCloser is a writer whose Close does nothing: stdout stays open.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
