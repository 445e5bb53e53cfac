package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/markov-agents/markov/resumehttp"
)

// ShutdownTimeout bounds how long serve waits for requests in flight when
// it stops.
const ShutdownTimeout = 30 * time.Second

// Serve serves the resumehttp endpoints for the database's machines, with
// a sweeper that resolves expired suspensions, until ctx is done (the
// markov command cancels it on SIGINT and SIGTERM); then it stops
// accepting requests, waits for those in flight and returns nil.
func Serve(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("serve")
	addr := fs.String("addr", "127.0.0.1:8080", "the `address` to listen on")
	secretEnv := fs.String("secret-env", "MARKOV_SECRET", "the environment `variable` holding the HMAC secret shared with the callers")
	sweep := fs.Duration("sweep", 30*time.Second, "how often to resolve expired suspensions (0: never)")
	var ui consoleFlags
	ui.register(fs)
	var scfg resumehttp.ServerConfig
	fs.DurationVar(&scfg.ReadTimeout, "read-timeout", resumehttp.DefaultReadTimeout, "how long a client may take to send a whole request")
	fs.DurationVar(&scfg.WriteTimeout, "write-timeout", resumehttp.DefaultWriteTimeout, "how long a request may take until its answer is written, the run it starts included")
	fs.DurationVar(&scfg.IdleTimeout, "idle-timeout", resumehttp.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	pos, err := c.Parse(fs, "serve", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return Usagef("serve", "unexpected argument %q", pos[0])
	}
	if *sweep < 0 {
		return Usagef("serve", "--sweep must not be negative")
	}
	if scfg.ReadTimeout <= 0 || scfg.WriteTimeout <= 0 || scfg.IdleTimeout <= 0 {
		return Usagef("serve", "--read-timeout, --write-timeout and --idle-timeout must be positive")
	}
	secret := c.getenv(*secretEnv)
	if secret == "" {
		return fmt.Errorf("$%s is not set: set it to the HMAC secret the callers sign with (at least %d bytes; for example: openssl rand -hex 32)", *secretEnv, resumehttp.MinSecretLen)
	}
	if err := resumehttp.CheckSecret([]byte(secret)); err != nil {
		return fmt.Errorf("$%s: %w (for example: openssl rand -hex 32)", *secretEnv, err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(c.stderr(), nil))
	}
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	api, err := resumehttp.New(resumehttp.Config{Runner: db.Runner, Secret: []byte(secret), Logger: c.Logger})
	if err != nil {
		return err
	}
	h, err := ui.mount(c, db, api)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *addr)
	if err != nil {
		return err
	}
	scfg.Logger = c.Logger
	srv := resumehttp.NewServer(*addr, h, scfg)

	w := c.Out()
	c.PrintModel()
	fmt.Fprintf(w, "serving the machines of %s on http://%s (requests signed with $%s)\n", db.Path, ln.Addr(), *secretEnv)
	if *sweep > 0 {
		fmt.Fprintf(w, "sweeping expired suspensions every %s\n", *sweep)
	}
	if c.onListen != nil {
		c.onListen(ln.Addr())
	}

	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	var wg sync.WaitGroup
	if *sweep > 0 {
		wg.Go(func() { _ = db.Runner.RunSweeper(sweepCtx, *sweep) })
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err = <-served: // the listener failed
		stopSweep()
		wg.Wait()
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(w, "shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	stopSweep()
	wg.Wait()
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	fmt.Fprintln(w, "stopped")
	return nil
}
