package cli

// This file is the fleet's side of the command line: the work serve and
// worker run beside their HTTP server (the fleet's workers, or SQLite's
// sweeper), the worker command, and the parked listing.

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/steptext"
)

// workFlags are the flags of serve and worker about the runs in the
// background.
type workFlags struct {
	workers               int
	shutdown              time.Duration
	takeOver, rescueAfter time.Duration
	fetchCooldown         time.Duration
}

// maxFetchCooldown is --fetch-cooldown's bound: River's poll interval,
// which the cooldown may not exceed.
const maxFetchCooldown = time.Second

func (f *workFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.workers, "workers", fleet.DefaultWorkers, "on PostgreSQL, how many machines this process runs at once for the fleet")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", ShutdownTimeout, "once told to stop (SIGTERM, SIGINT), how long to let the runs in progress (and requests in flight) finish; runs still going are then cancelled and continue in another worker from their last save")
	fs.DurationVar(&f.takeOver, "take-over-after", fleet.DefaultTakeOverAfter, "on PostgreSQL, how long a job may run while no process holds its machine's lock (its worker died) before this process takes it over; looked at every half of it")
	fs.DurationVar(&f.fetchCooldown, "fetch-cooldown", fleet.DefaultFetchCooldown, "on PostgreSQL, the least time between two fetches of jobs by this process, and between two of its notifications that it accepted inputs (1ms to 1s): an accepted input waits up to about twice it before a worker fetches its job")
	fs.DurationVar(&f.rescueAfter, "rescue-after", fleet.DefaultRescueAfter, "on PostgreSQL, how long a run may go on before River's rescuer hands its job to another worker, which waits for the machine (the backstop behind --take-over-after)")
}

// apply sets the fleet's configuration from the flags.
func (f *workFlags) apply(cfg *fleet.Config) {
	cfg.Workers, cfg.TakeOverAfter, cfg.RescueAfter = f.workers, f.takeOver, f.rescueAfter
	cfg.FetchCooldown = f.fetchCooldown
}

// check reports bad values as a UsageError of command; workers must be at
// least minWorkers.
func (f *workFlags) check(command string, minWorkers int) error {
	if f.workers < minWorkers {
		return Usagef(command, "--workers must be at least %d", minWorkers)
	}
	if f.shutdown <= 0 {
		return Usagef(command, "--shutdown-timeout must be positive")
	}
	if f.takeOver <= 0 || f.rescueAfter <= 0 {
		return Usagef(command, "--take-over-after and --rescue-after must be positive")
	}
	if f.fetchCooldown < time.Millisecond || f.fetchCooldown > maxFetchCooldown {
		return Usagef(command, "--fetch-cooldown must be from 1ms to %s", maxFetchCooldown)
	}
	return nil
}

// startWork starts what runs machines in the background of this process:
// on PostgreSQL the fleet's workers (none if workers is 0); on SQLite the
// recovery of the runs cut short when a process stopped after accepting
// their input (durable.Runner.Recover; a fleet's jobs are retried
// instead), then the sweeper (none if sweep is 0). It returns a line
// saying what it started, and stop, which stops taking work and waits for
// the runs in progress until its context ends, then cancels them.
func (c *CLI) startWork(ctx context.Context, db *DB, sweep time.Duration, workers int) (stop func(context.Context) error, what string, err error) {
	nothing := func(context.Context) error { return nil }
	switch {
	case db.Fleet != nil && workers == 0:
		return nothing, "no fleet workers in this process (--workers 0): inputs and deadlines are worked by 'worker' processes", nil
	case db.Fleet != nil:
		// River cancels the running jobs when the context given to Start
		// ends: stopping is Stop's, within its own deadline.
		if err := db.Fleet.Start(context.WithoutCancel(ctx)); err != nil {
			return nil, "", err
		}
		return func(ctx context.Context) error { return c.stopFleet(ctx, db.Fleet) },
			fmt.Sprintf("running the fleet's machines (inputs, deadlines) with %d workers", workers), nil
	}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.recoverRuns(workCtx, db)
		if sweep > 0 {
			_ = db.Runner.RunSweeper(workCtx, sweep)
		}
	}()
	what = "continuing the runs cut short by a stop"
	if sweep > 0 {
		what += fmt.Sprintf("; sweeping expired suspensions every %s", sweep)
	}
	return func(context.Context) error { stopWork(); <-done; return nil }, what, nil
}

// recoverRuns continues the runs of db cut short by a stop
// (durable.Runner.Recover), logging how many, or why it could not.
func (c *CLI) recoverRuns(ctx context.Context, db *DB) {
	n, err := db.Runner.Recover(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		c.logger().LogAttrs(ctx, slog.LevelError, "continuing the runs cut short", slog.Int("continued", n), slog.String("error", err.Error()))
	case n > 0:
		c.logger().LogAttrs(ctx, slog.LevelInfo, "continued the runs cut short", slog.Int("continued", n))
	}
}

// stopFleet stops the fleet's workers: they take no more jobs, and the
// runs in progress finish unless ctx ends first; then they are cancelled,
// and their jobs are retried by the fleet's other workers, which continue
// the machines from their last save. That is a normal shutdown: no error.
func (c *CLI) stopFleet(ctx context.Context, f *fleet.Fleet) error {
	err := f.Stop(ctx)
	if err != nil && ctx.Err() != nil {
		c.logger().LogAttrs(ctx, slog.LevelWarn, "shutdown timeout: the runs in progress were cancelled; other workers continue them from their last save")
		return nil
	}
	return err
}

// logger returns Logger, or a silent one.
func (c *CLI) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// Worker runs the fleet's workers of a PostgreSQL database, with no HTTP
// API (only the health probes, with --health), until ctx is done (SIGTERM,
// SIGINT); then it takes no more jobs and lets the runs in progress finish
// within --shutdown-timeout (runs still going are cancelled and continue
// in another worker from their last save) and returns nil. On SQLite it
// refuses: there is no fleet without PostgreSQL.
func Worker(ctx context.Context, c *CLI, args []string) error {
	var work workFlags
	fs := c.FlagSet("worker")
	work.register(fs)
	health := fs.String("health", "", "serve the unauthenticated GET /healthz and /readyz on this `address` (none if empty)")
	_, err := c.ParseArgs(fs, "worker", args, 0, 0, "")
	if err != nil {
		return err
	}
	if err := work.check("worker", 1); err != nil {
		return err
	}
	if err := c.needFleet("worker"); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(c.stderr(), nil))
	}
	work.apply(&c.fleet)
	db, err := c.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	var srv *http.Server
	var ln net.Listener
	if *health != "" {
		var lc net.ListenConfig
		if ln, err = lc.Listen(ctx, "tcp", *health); err != nil {
			return err
		}
		srv = resumehttp.NewServer(*health, withProbes(http.NotFoundHandler(), db.Store), resumehttp.ServerConfig{Logger: c.Logger})
	}
	stopWork, what, err := c.startWork(ctx, db, 0, work.workers)
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return err
	}
	w := c.Out()
	c.PrintModel()
	fmt.Fprintf(w, "worker for %s: %s\n", db.Name, what)
	if ln != nil {
		fmt.Fprintf(w, "health probes on http://%s/healthz and /readyz\n", ln.Addr())
		if c.onListen != nil {
			c.onListen(ln.Addr())
		}
	}
	return c.runUntilDone(ctx, work.shutdown, db, srv, ln, stopWork)
}

// Parked lists the parked machines with their errors, most recent first:
// on PostgreSQL those whose fleet job failed its attempts, on SQLite those
// the sweeper could not run since their last save.
func Parked(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("parked")
	n := fs.Int("n", 100, "list at most `N` machines")
	out := OutputFlag(fs)
	_, err := c.ParseArgs(fs, "parked", args, 0, 0, "")
	if err != nil {
		return err
	}
	if *n <= 0 {
		return Usagef("parked", "-n must be positive")
	}
	db, err := c.OpenReadOnly(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	var lister resumehttp.ParkedLister = db.Runner
	if db.Fleet != nil {
		lister = db.Fleet
	}
	list, err := lister.Parked(ctx, *n)
	if err != nil {
		return err
	}
	if *out == FormatJSON {
		return c.WriteJSON(resumehttp.ParkedMachines(list))
	}
	w := c.Out()
	if len(list) == 0 {
		fmt.Fprintf(w, "no parked machines in %s\n", db.Name)
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "MACHINE\tJOB\tPARKED AT\tATTEMPTS\tLAST ERROR")
	for _, p := range list {
		last := ""
		if len(p.Errors) > 0 {
			last = p.Errors[len(p.Errors)-1]
		}
		job := p.Kind
		if p.Job != 0 {
			job += " " + strconv.FormatInt(p.Job, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", p.MachineID, job, formatTime(p.At), len(p.Errors), steptext.OneLine(last, 120))
	}
	return tw.Flush()
}
