package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/markov-agents/markov/acp"
)

// ACP serves the charter as an Agent Client Protocol agent on stdin and
// stdout (an editor starts "markov acp" and talks to it over its pipes):
// each ACP session is a machine of the database, started at --node (the
// CLI's Node by default). Nothing but the protocol is written to stdout;
// the log goes to stderr. It returns when the client closes stdin or ctx
// is done (SIGINT, SIGTERM).
func ACP(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("acp")
	nodeName := fs.String("node", c.Node, "the `node` new sessions start at")
	sweep := fs.Duration("sweep", time.Second, "on SQLite, how often to resolve expired suspensions (0: never); on PostgreSQL the fleet's workers do")
	watch := fs.Duration("watch", acp.DefaultWatchInterval, "how often a parked session is checked for a resume from elsewhere, on a store without an event log (SQLite and PostgreSQL have one: sessions follow their machines' events)")
	_, err := c.ParseArgs(fs, "acp", args, 0, 0, "")
	if err != nil {
		return err
	}
	if *nodeName == "" {
		return Usagef("acp", "--node is required")
	}
	if *sweep < 0 || *watch < 0 {
		return Usagef("acp", "--sweep and --watch must not be negative")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(c.stderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	agent, err := acp.New(acp.Config{Runner: db.Runner, Node: *nodeName, Name: c.name(), Version: c.versionInfo().Version, WatchInterval: *watch, Logger: c.Logger})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	if *sweep > 0 && db.Fleet == nil { // on PostgreSQL, the fleet's workers expire deadlines
		wg.Go(func() { _ = db.Runner.RunSweeper(ctx, *sweep) })
	}
	err = agent.Serve(ctx, c.stdin(), c.Out())
	stop()
	wg.Wait()
	if ctx.Err() != nil {
		return nil // stopped by a signal
	}
	return err
}

// stdin is Stdin, or the process's standard input when nil.
func (c *CLI) stdin() io.Reader {
	if c.Stdin == nil {
		return os.Stdin
	}
	return c.Stdin
}
