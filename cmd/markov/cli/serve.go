package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/webhook"
)

// ShutdownTimeout is the default of serve's and worker's
// --shutdown-timeout: how long they wait, once told to stop, for the
// requests in flight and the runs in progress.
const ShutdownTimeout = 30 * time.Second

// serveConfig is serve's validated command line.
type serveConfig struct {
	addr      string
	secretEnv string
	secret    []byte
	sweep     time.Duration
	maxWait   time.Duration
	// retries is --retries: on SQLite, how often a run after an accepted
	// input is tried again (durable.Retry.Attempts).
	retries int
	// limits are the API's body cap and failure limit; proxies the
	// reverse proxies whose forwarded client addresses key it.
	limits  resumehttp.Config
	proxies []netip.Prefix
	work    workFlags
	ui      consoleFlags
	agui    aguiFlags
	a2aPush a2aPushFlag
	server  resumehttp.ServerConfig
	// webhooks is the --webhooks file, read; sender its subscriptions'.
	webhooks *webhookFile
	sender   *webhook.Sender
}

// Serve serves the resumehttp endpoints for the database's machines until
// ctx is done (the markov command cancels it on SIGINT and SIGTERM), with
// what runs machines in the background: on SQLite a sweeper that resolves
// expired suspensions, on PostgreSQL the fleet's workers (--workers, 0:
// none in this process). Resumes, cancellations and commands are answered
// 202 Accepted once their input is durable (resumehttp.Config.Acceptor:
// the runner on SQLite, the fleet on PostgreSQL), or with the run's
// summary when the client waits (Prefer: wait=N, up to --max-wait). Then
// it stops accepting requests and jobs, waits for the requests in flight
// and the runs in progress within --shutdown-timeout (runs still going
// are cancelled and continue from their last save) and returns nil.
func Serve(ctx context.Context, c *CLI, args []string) error {
	cfg, err := c.parseServe(args)
	if err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(c.stderr(), nil))
	}
	cfg.work.apply(&c.fleet)
	c.retry = durable.Retry{Attempts: cfg.retries}
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	h, stopAGUI, err := c.serveHandler(cfg, db)
	if err != nil {
		return err
	}
	defer stopAGUI() // its runs in progress: each continues from its last save
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.addr)
	if err != nil {
		return err
	}
	cfg.server.Logger = c.Logger
	srv := resumehttp.NewServer(cfg.addr, h, cfg.server)
	stopWork, what, err := c.startWork(ctx, db, cfg.sweep, cfg.work.workers)
	if err != nil {
		_ = ln.Close()
		return err
	}
	stopSender := runSender(ctx, cfg.sender, func(err error) {
		c.logger().LogAttrs(ctx, slog.LevelError, "webhooks out stopped", slog.String("error", err.Error()))
	})
	stopAll := func(ctx context.Context) error { stopSender(); return stopWork(ctx) }

	w := c.Out()
	c.PrintModel()
	fmt.Fprintf(w, "serving the machines of %s on http://%s (requests signed with $%s)\n", db.Name, ln.Addr(), cfg.secretEnv)
	if what != "" {
		fmt.Fprintln(w, what)
	}
	if c.onListen != nil {
		c.onListen(ln.Addr())
	}
	return c.runUntilDone(ctx, cfg.work.shutdown, db, srv, ln, stopAll)
}

// DefaultRetries is serve's --retries: with backoff doubling from a
// second to five minutes, ten retries span about half an hour.
const DefaultRetries = 10

// parsePrefixes parses a comma-separated list of CIDRs and addresses (an
// address is its own /32 or /128).
func parsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an address", item)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// waitAccepted waits for the runs the runner continues in the background
// after accepting their input (on SQLite; a fleet's are its jobs'); when
// ctx ends first they are cancelled, each machine left at its last save
// with the input applied, and its next run continues it. That is a normal
// shutdown: no error.
func (c *CLI) waitAccepted(ctx context.Context, db *DB) error {
	err := db.Runner.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		c.logger().LogAttrs(ctx, slog.LevelWarn, "shutdown timeout: the runs of accepted inputs were cancelled; each machine continues from its last save on its next run")
		return nil
	}
	return err
}

// parseServe parses and checks serve's flags and reads its secret.
func (c *CLI) parseServe(args []string) (*serveConfig, error) {
	var cfg serveConfig
	fs := c.FlagSet("serve")
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "the `address` to listen on")
	fs.StringVar(&cfg.secretEnv, "secret-env", "MARKOV_SECRET", "the environment `variable` holding the HMAC secret shared with the callers")
	fs.DurationVar(&cfg.sweep, "sweep", 30*time.Second, "on SQLite, how often to resolve expired suspensions (0: never); on PostgreSQL the fleet's workers do")
	fs.IntVar(&cfg.retries, "retries", DefaultRetries, "on SQLite, how many times a run that failed after an accepted input (a decision, a command) is tried again, waiting 1s, doubled each time up to 5m, before the machine is parked (0: never; it then waits for its next input or a restart); on PostgreSQL the fleet's jobs retry")
	fs.DurationVar(&cfg.maxWait, "max-wait", resumehttp.DefaultMaxWait, "the longest a resume, cancel or command waits for its run when the client asks to (Prefer: wait=N) before answering 202 Accepted (negative: never wait); under --write-timeout")
	fs.Int64Var(&cfg.limits.MaxBody, "max-body", resumehttp.DefaultMaxBody, "the largest request body accepted, in `bytes` (larger: 413)")
	fs.IntVar(&cfg.limits.FailureBurst, "failure-burst", resumehttp.DefaultFailureBurst, "how many failed authentications a client address may make in a row before its requests get 429")
	fs.DurationVar(&cfg.limits.FailureRefill, "failure-refill", resumehttp.DefaultFailureRefill, "how long it takes for one failed authentication to be forgiven")
	webhooks := fs.String("webhooks", "", "a JSON `file` of webhook routes (signed deliveries in, under "+HooksPrefix+") and subscriptions (events out, signed per Standard Webhooks): docs/webhooks.md")
	proxies := fs.String("trusted-proxies", "", "comma-separated `CIDRs` (or addresses) of the reverse proxies in front of serve: a request from one is keyed, for the failure limit, by the client address it forwards (Forwarded, X-Forwarded-For); none if empty")
	cfg.work.register(fs)
	cfg.ui.register(fs)
	cfg.agui.register(fs, c.Node)
	cfg.a2aPush.register(fs)
	fs.DurationVar(&cfg.server.ReadTimeout, "read-timeout", resumehttp.DefaultReadTimeout, "how long a client may take to send a whole request")
	fs.DurationVar(&cfg.server.WriteTimeout, "write-timeout", resumehttp.DefaultWriteTimeout, "how long a request may take until its answer is written (a wait for its run included: --max-wait)")
	fs.DurationVar(&cfg.server.IdleTimeout, "idle-timeout", resumehttp.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	_, err := c.ParseArgs(fs, "serve", args, 0, 0, "")
	if err != nil {
		return nil, err
	}
	if cfg.sweep < 0 {
		return nil, Usagef("serve", "--sweep must not be negative")
	}
	if cfg.retries < 0 {
		return nil, Usagef("serve", "--retries must not be negative")
	}
	if cfg.limits.MaxBody <= 0 || cfg.limits.FailureBurst <= 0 || cfg.limits.FailureRefill <= 0 {
		return nil, Usagef("serve", "--max-body, --failure-burst and --failure-refill must be positive")
	}
	if cfg.proxies, err = parsePrefixes(*proxies); err != nil {
		return nil, Usagef("serve", "--trusted-proxies: %v", err)
	}
	if *webhooks != "" {
		if cfg.webhooks, err = c.readWebhooks(*webhooks); err != nil {
			return nil, err
		}
	}
	if err := cfg.work.check("serve", 0); err != nil {
		return nil, err
	}
	if err := cfg.agui.check("serve"); err != nil {
		return nil, err
	}
	if err := cfg.a2aPush.check("serve"); err != nil {
		return nil, err
	}
	if cfg.server.ReadTimeout <= 0 || cfg.server.WriteTimeout <= 0 || cfg.server.IdleTimeout <= 0 {
		return nil, Usagef("serve", "--read-timeout, --write-timeout and --idle-timeout must be positive")
	}
	if cfg.maxWait >= cfg.server.WriteTimeout {
		return nil, Usagef("serve", "--max-wait %s must be under --write-timeout %s (the answer must be written in time)", cfg.maxWait, cfg.server.WriteTimeout)
	}
	secret := c.getenv(cfg.secretEnv)
	if secret == "" {
		return nil, fmt.Errorf("$%s is not set: set it to the HMAC secret the callers sign with (at least %d bytes; for example: openssl rand -hex 32)", cfg.secretEnv, resumehttp.MinSecretLen)
	}
	if err := resumehttp.CheckSecret([]byte(secret)); err != nil {
		return nil, fmt.Errorf("$%s: %w (for example: openssl rand -hex 32)", cfg.secretEnv, err)
	}
	cfg.secret = []byte(secret)
	return &cfg, nil
}

// serveHandler assembles serve's handler: the unauthenticated probes, the
// signed resumehttp endpoints and, when asked for, the console, the
// AG-UI endpoint and the webhooks; and the function that stops the AG-UI
// endpoint's runs.
func (c *CLI) serveHandler(cfg *serveConfig, db *DB) (http.Handler, func(), error) {
	rc := resumehttp.Config{Runner: db.Runner, Secret: cfg.secret, Acceptor: db.Runner, MaxWait: cfg.maxWait, Logger: c.Logger,
		MaxBody: cfg.limits.MaxBody, FailureBurst: cfg.limits.FailureBurst, FailureRefill: cfg.limits.FailureRefill}
	if len(cfg.proxies) > 0 {
		rc.ClientKey = resumehttp.TrustedProxies(cfg.proxies...)
	}
	if db.Fleet != nil {
		rc.Acceptor = db.Fleet // the input is committed with its job, for any worker
	}
	api, err := resumehttp.New(rc)
	if err != nil {
		return nil, nil, err
	}
	if cfg.sender, err = c.newSender(cfg.webhooks, db); err != nil {
		return nil, nil, err
	}
	h, ui, err := cfg.ui.mount(c, db, api, rc, cfg.sender, cfg.agui.path != "")
	if err != nil {
		return nil, nil, err
	}
	h, stop, err := cfg.agui.mount(c, db, api, ui, h)
	if err != nil {
		return nil, nil, err
	}
	if cfg.webhooks != nil {
		if h, err = c.mountWebhooks(cfg.webhooks, cfg.sender, db, rc, api, h); err != nil {
			stop()
			return nil, nil, err
		}
	}
	h = cfg.a2aPush.mount(c, db, h) // authenticated by each task's token, not the API's signature
	return withProbes(h, db.Store), stop, nil
}

// runUntilDone serves srv on ln (none if srv is nil) until ctx is done or
// the listener fails; then, within the shutdown timeout, it stops the
// background work (stopWork) and, together, shuts srv down and waits for
// the runs of the inputs its requests accepted.
func (c *CLI) runUntilDone(ctx context.Context, shutdown time.Duration, db *DB, srv *http.Server, ln net.Listener, stopWork func(context.Context) error) error {
	var served chan error // nil without a server: never ready
	if srv != nil {
		served = make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
	}
	select {
	case err := <-served: // the listener failed
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdown)
		defer cancel()
		return errors.Join(err, stopWork(stopCtx), c.waitAccepted(stopCtx, db))
	case <-ctx.Done():
	}
	w := c.Out()
	fmt.Fprintln(w, "shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdown)
	defer cancel()
	var workErr error
	var wg sync.WaitGroup
	wg.Go(func() { workErr = stopWork(shutCtx) })
	var err error
	if srv != nil {
		err = srv.Shutdown(shutCtx)
		if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
			err = serveErr
		}
		err = errors.Join(err, c.waitAccepted(shutCtx, db))
	}
	wg.Wait()
	if err = errors.Join(err, workErr); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	fmt.Fprintln(w, "stopped")
	return nil
}
