// Package cli is the command-line front end of markov, reusable with any
// charter: create a machine, send it a message or invoke a command on it,
// list pending suspensions, inspect a machine, resume or cancel a
// suspension, print the node graph, serve the HTTP resume endpoint and
// run a fleet's workers, against machines kept by a durable.Runner in a
// SQLite file or in PostgreSQL (--store postgres://…), where a fleet
// (package durable/fleet) runs them across processes.
//
// Conventions: "help", -h and --help (also after a command) print help on
// stdout and exit 0; a bad command line prints the usage on stderr and
// exits 2 (ExitUsage); a failed command exits 1. "version" prints the
// program's module version ("(devel)" when unknown) and the Go version.
// The commands that show something (pending, inspect, create, run,
// invoke, resume, cancel, parked, version) take -o text|json. Text, the
// default, is for people (steps are written with package steptext) and
// may change; JSON is stable — fields are added, never renamed or removed:
//
//   - pending: an array of Call;
//   - inspect MACHINE: the machine in serialize.MarshalJSON's form;
//     inspect without an ID: an array of {"machine_id"};
//   - create: {"machine_id", "node"};
//   - run, invoke, resume, cancel: a RunResult (the calls still pending
//     are Calls);
//   - parked: an array of {"machine_id", "kind", "job", "parked_at",
//     "errors"};
//   - version: a VersionInfo.
//
// The database is a SQLite file (--store FILE, the default markov.db) or
// a PostgreSQL URL (--store postgres://…, --schema), a fleet's database
// (package durable/fleet): there serve and worker run the fleet's
// workers, and stop on SIGTERM by letting the runs in progress finish
// within --shutdown-timeout, then cancelling them (another worker
// continues them from their last save); parked lists the machines the
// fleet gave up on. On SQLite, parked lists the machines serve's sweeper
// could not run.
//
// The markov command wires it to the refund demo's charter. A real
// application builds its own binary with its own charter (the charter
// holds the Go code of tools and nodes, so a stored machine can only be
// resumed by a program that has it):
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		defer stop()
//		c := &cli.CLI{Name: "myapp", Charter: myCharter, Stdout: os.Stdout, Stderr: os.Stderr}
//		os.Exit(c.Main(ctx, os.Args[1:]))
//	}
package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/machine"
)

// DefaultDB is the database file the commands use when --db is not given.
const DefaultDB = "markov.db"

// Exit codes of Main.
const (
	ExitOK    = 0 // success
	ExitError = 1 // the command failed
	ExitUsage = 2 // bad command line
)

// CLI is a markov command line for one charter. Set the fields, then call
// Main or Run; a CLI runs one command line.
type CLI struct {
	// Name is the program name in usage and error messages ("markov" if
	// empty).
	Name string
	// Charter runs the stored machines. Required.
	Charter *machine.Charter
	// Model describes the charter's model in one line; the commands that
	// call the model (resume, cancel, serve and extra ones) print it.
	// Empty prints nothing.
	Model string
	// Commands are extra subcommands (for example a demo), listed before
	// the built-in ones. A name clash replaces the built-in command.
	Commands []Command
	// Stdout receives the commands' output, Stderr errors and usage (nil:
	// discarded).
	Stdout, Stderr io.Writer
	// Stdin is what acp and mcp read the client's messages from (nil:
	// the process's standard input).
	Stdin io.Reader
	// Node is the node acp starts new sessions at, and mcp new
	// conversations (their --node default).
	Node string
	// Getenv reads environment variables (serve's secret); nil means
	// os.Getenv.
	Getenv func(string) string
	// Logger receives what the runner and the server do (serve logs to
	// Stderr when nil; the other commands are silent).
	Logger *slog.Logger

	store storeFlags
	// fleet configures the fleet of a PostgreSQL store (serve's and
	// worker's flags); Store, Charter and Logger are filled in by open.
	fleet fleet.Config
	// retry is how a SQLite runner retries a run after an accepted input
	// that failed (serve's --retries; none for the other commands).
	retry durable.Retry
	// onListen, when set, is told the address serve listens on (tests).
	onListen func(net.Addr)
	// readBuildInfo replaces debug.ReadBuildInfo (tests).
	readBuildInfo func() (*debug.BuildInfo, bool)
}

// Command is a subcommand.
type Command struct {
	// Name is what selects the command: "markov <Name> ...".
	Name string
	// Args is the synopsis after the name, for usage:
	// "[flags] <suspend-id> <json-payload>".
	Args string
	// Summary is one line for the command list.
	Summary string
	// Hidden commands work but are not listed.
	Hidden bool
	// Run runs the command with the arguments after its name. Return a
	// UsageError for a bad command line. Parse args with c.FlagSet and
	// c.Parse: "help <name>" runs the command with "-h", which Parse
	// answers with the command's usage and flags.
	Run func(ctx context.Context, c *CLI, args []string) error
}

// UsageError reports a bad command line: Main prints it with the
// command's usage and exits with ExitUsage.
type UsageError struct {
	Command string // the subcommand, "" for the program itself
	Msg     string
}

// Error returns the message.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a UsageError for command.
func Usagef(command, format string, args ...any) error {
	return &UsageError{Command: command, Msg: fmt.Sprintf(format, args...)}
}

// Main runs the command line args (without the program name), prints any
// error to Stderr and returns the exit code: ExitOK, ExitError or
// ExitUsage.
func (c *CLI) Main(ctx context.Context, args []string) int {
	err := c.Run(ctx, args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if ue, ok := errors.AsType[*UsageError](err); ok {
		name := c.name()
		if ue.Command != "" {
			name += " " + ue.Command
		}
		fmt.Fprintf(c.stderr(), "%s: %s\n", name, ue.Msg)
		c.usage(ue.Command)
		return ExitUsage
	}
	fmt.Fprintf(c.stderr(), "%s: %v\n", c.name(), err)
	return ExitError
}

// Run runs the command line args (without the program name) and returns
// its error: a *UsageError for a bad command line, flag.ErrHelp after
// -h.
func (c *CLI) Run(ctx context.Context, args []string) error {
	if c.Charter == nil {
		return errors.New("cli: CLI.Charter is nil")
	}
	fs := flag.NewFlagSet(c.name(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.store.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// -h and --help ask for help: it goes to stdout.
			fmt.Fprint(c.Out(), c.Usage())
			return err
		}
		return Usagef("", "%v", err)
	}
	c.visitStore(fs)
	rest := fs.Args()
	if len(rest) == 0 {
		return Usagef("", "no command given")
	}
	name := rest[0]
	if name == "help" {
		if len(rest) > 1 {
			if cmd, ok := c.command(rest[1]); ok {
				// Every command prints its flags on -h.
				if err := cmd.Run(ctx, c, []string{"-h"}); err != nil && !errors.Is(err, flag.ErrHelp) {
					return err
				}
				return nil
			}
			return Usagef("", "unknown command %q", rest[1])
		}
		fmt.Fprint(c.Out(), c.Usage())
		return nil
	}
	cmd, ok := c.command(name)
	if !ok {
		return Usagef("", "unknown command %q", name)
	}
	return cmd.Run(ctx, c, rest[1:])
}

// commands returns the extra commands followed by the built-in ones they
// do not replace.
func (c *CLI) commands() []Command {
	all := slices.Clone(c.Commands)
	for _, b := range builtins() {
		if !slices.ContainsFunc(c.Commands, func(x Command) bool { return x.Name == b.Name }) {
			all = append(all, b)
		}
	}
	return all
}

func (c *CLI) command(name string) (Command, bool) {
	for _, cmd := range c.commands() {
		if cmd.Name == name {
			return cmd, true
		}
	}
	return Command{}, false
}

// usage prints the usage of command, or of the program when command is
// "".
func (c *CLI) usage(command string) {
	w := c.stderr()
	if cmd, ok := c.command(command); ok && command != "" {
		fmt.Fprintf(w, "usage: %s %s %s\nRun '%s %s -h' for details.\n", c.name(), cmd.Name, cmd.Args, c.name(), cmd.Name)
		return
	}
	fmt.Fprint(w, c.Usage())
}

// Usage returns the program's usage text.
func (c *CLI) Usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s [--store FILE|URL] <command> [flags] [args]\n\ncommands:\n", c.name())
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	for _, cmd := range c.commands() {
		if !cmd.Hidden {
			fmt.Fprintf(tw, "  %s\t%s\n", cmd.Name, cmd.Summary)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nEvery command takes --store, the database: a SQLite file (default %s in\n"+
		"the current directory; --db FILE is the same) or a postgres:// URL, a fleet's\n"+
		"database (with --schema, default markov). Those that show something take\n"+
		"-o text|json (json is stable, for programs). Run '%s help <command>' for its\n"+
		"arguments and flags.\n", DefaultDB, c.name())
	return b.String()
}

// FlagSet returns a flag set for the subcommand name with the common
// flags that choose the database (--store, --db, --schema). Parse it with
// Parse.
func (c *CLI) FlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name()+" "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.store.register(fs)
	return fs
}

// visitStore records whether fs set the database.
func (c *CLI) visitStore(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) { c.store.set = c.store.set || f.Name == "db" || f.Name == "store" })
}

// Parse parses args with fs, allowing flags after positional arguments
// ("--" ends the flags), and returns the positional arguments. A bad flag
// is a UsageError; -h prints the command's usage and flags and returns
// flag.ErrHelp.
func (c *CLI) Parse(fs *flag.FlagSet, command string, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printFlags(fs, command)
				return nil, err
			}
			return nil, Usagef(command, "%v", err)
		}
		rest := fs.Args()
		// Parse stops at the first positional argument, or after "--".
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	c.visitStore(fs)
	if err := c.store.check(command); err != nil {
		return nil, err
	}
	return pos, nil
}

// ParseArgs parses args with [CLI.Parse] and checks the number of
// positional arguments, from min to max (max < 0: no limit). A command that
// takes none (max 0) refuses the first one given; otherwise a count out of
// range is a UsageError saying what the command wants ("a machine ID").
func (c *CLI) ParseArgs(fs *flag.FlagSet, command string, args []string, min, max int, want string) ([]string, error) {
	pos, err := c.Parse(fs, command, args)
	switch {
	case err != nil:
		return nil, err
	case max == 0 && len(pos) > 0:
		return nil, Usagef(command, "unexpected argument %q", pos[0])
	case len(pos) < min || max >= 0 && len(pos) > max:
		return nil, Usagef(command, "want %s, got %d arguments", want, len(pos))
	}
	return pos, nil
}

// printFlags prints the usage of command with the flags of fs, on
// stdout: it answers -h.
func (c *CLI) printFlags(fs *flag.FlagSet, command string) {
	w := c.Out()
	if cmd, ok := c.command(command); ok {
		fmt.Fprintf(w, "usage: %s %s %s\n\n%s\n\nflags:\n", c.name(), cmd.Name, cmd.Args, cmd.Summary)
	}
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// DB returns the database the command line chose — a SQLite file's path
// or a PostgreSQL URL — and whether it was given explicitly (--store or
// --db).
func (c *CLI) DB() (loc string, explicit bool) {
	return cmp.Or(c.store.loc, DefaultDB), c.store.set
}

// SetDB makes the commands use the database path from now on (a demo's
// temporary database), as if --store had not been given.
func (c *CLI) SetDB(path string) { c.store.loc, c.store.set = path, false }

// Open opens the database the command line chose (--store). When
// mustExist is set, a missing SQLite file is an error rather than a new,
// empty database. A PostgreSQL database's schema is created or brought up
// to date (postgres.Open).
func (c *CLI) Open(ctx context.Context, mustExist bool) (*DB, error) {
	return c.open(ctx, mustExist, false)
}

// OpenReadOnly opens the database the command line chose (--store) for
// reading. A SQLite file is opened read-only (sqlite.Config.ReadOnly): it
// must exist with the current schema, and the process needs no write
// access to it or to its directory. A PostgreSQL database is opened as by
// Open. The listing commands (pending, inspect, watch) use it.
func (c *CLI) OpenReadOnly(ctx context.Context) (*DB, error) {
	return c.open(ctx, true, true)
}

// Out returns the writer for the commands' output (Stdout, or a discard
// writer when nil).
func (c *CLI) Out() io.Writer {
	if c.Stdout == nil {
		return io.Discard
	}
	return c.Stdout
}

func (c *CLI) stderr() io.Writer {
	if c.Stderr == nil {
		return io.Discard
	}
	return c.Stderr
}

func (c *CLI) name() string {
	if c.Name == "" {
		return "markov"
	}
	return c.Name
}

func (c *CLI) getenv(k string) string {
	if c.Getenv != nil {
		return c.Getenv(k)
	}
	return os.Getenv(k)
}

// PrintModel prints the model line ("model: ...") when Model is set.
func (c *CLI) PrintModel() {
	if c.Model != "" {
		fmt.Fprintf(c.Out(), "model: %s\n", c.Model)
	}
}
