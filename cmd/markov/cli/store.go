package cli

// This file is the database the commands open: a SQLite file, or a
// PostgreSQL database whose machines a fleet (package durable/fleet) runs.

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/standing"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/sqlite"
)

// DefaultConnectTimeout bounds each connection attempt to a PostgreSQL
// store whose URL sets no connect_timeout, so that an unreachable server
// fails a command instead of hanging it.
const DefaultConnectTimeout = 10 * time.Second

// IsPostgres reports whether a --store value names a PostgreSQL database
// (a postgres:// or postgresql:// URL) rather than a SQLite file.
func IsPostgres(loc string) bool {
	return strings.HasPrefix(loc, "postgres://") || strings.HasPrefix(loc, "postgresql://")
}

// DB is an open database: the store, a durable.Runner over it for the
// CLI's charter and, on PostgreSQL, the fleet that runner belongs to.
type DB struct {
	// Name names the database in messages: the SQLite file's path, or the
	// PostgreSQL URL without its password and parameters, and the schema.
	Name string
	// Path is the SQLite file; empty on PostgreSQL.
	Path string
	// Store is the store: a *sqlite.Store or a *postgres.Store.
	Store store.Store
	// Runner runs the stored machines; on PostgreSQL it is Fleet's runner
	// (its runs hold the machine fleet-wide and schedule their deadlines).
	Runner *durable.Runner
	// Fleet is the fleet of the PostgreSQL database, nil on SQLite. It
	// works no job until started (serve, worker); the other commands run
	// machines synchronously with Runner beside it.
	Fleet *fleet.Fleet

	close func() error
}

// Close closes the store (and its connections).
func (d *DB) Close() error { return d.close() }

// storeFlags are the flags that choose the database, on the program and
// on every command.
type storeFlags struct {
	loc    string // --store / --db
	schema string // --schema
	set    bool   // --store or --db was given
	rules  string // --rules: a file of standing approvals
	tenant string // --tenant
}

// register adds --store, --db and --schema to fs.
func (f *storeFlags) register(fs *flag.FlagSet) {
	if f.loc == "" {
		f.loc = DefaultDB
	}
	fs.StringVar(&f.loc, "store", f.loc, "the database: a SQLite `file|URL`, or a postgres:// URL (a fleet's database)")
	fs.StringVar(&f.loc, "db", f.loc, "same as --store (a SQLite `file`)")
	fs.StringVar(&f.schema, "schema", f.schema, "the PostgreSQL `schema` holding the store's tables (default markov)")
	fs.StringVar(&f.rules, "rules", f.rules, "a JSON `file` of standing approvals that decide matching suspensions at once (docs/approvals.md)")
	fs.StringVar(&f.tenant, "tenant", f.tenant, "the tenant `label` standing approvals' scope.tenant matches")
}

// loadRules loads the --rules file, nil without one.
func (f *storeFlags) loadRules() (*standing.Set, error) {
	if f.rules == "" {
		return nil, nil
	}
	file, err := os.Open(f.rules)
	if err != nil {
		return nil, fmt.Errorf("--rules: %w", err)
	}
	defer file.Close()
	set, err := standing.Load(file)
	if err != nil {
		return nil, fmt.Errorf("--rules %s: %w", f.rules, err)
	}
	return set, nil
}

// check reports a bad store choice as a UsageError of command.
func (f *storeFlags) check(command string) error {
	if !IsPostgres(f.loc) {
		if f.schema != "" {
			return Usagef(command, "--schema is for a PostgreSQL store (--store postgres://…), not the SQLite file %s", f.loc)
		}
		return nil
	}
	if _, err := pgxpool.ParseConfig(f.loc); err != nil {
		return Usagef(command, "--store: not a PostgreSQL URL (postgres://user:password@host:port/database?sslmode=disable): %v", err)
	}
	return nil
}

func (c *CLI) open(ctx context.Context, mustExist, readOnly bool) (*DB, error) {
	path, _ := c.DB()
	rules, err := c.store.loadRules()
	if err != nil {
		return nil, err
	}
	if IsPostgres(path) {
		return c.openPostgres(ctx, path, rules)
	}
	if mustExist {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("database %s does not exist (pass --db FILE, or create a machine in it with '%s create --db %s <node>')", path, c.name(), path)
		}
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	r, err := durable.New(durable.Config{Store: st, Charter: c.Charter, Logger: c.Logger, Retry: c.retry, Rules: rules, Tenant: c.store.tenant})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &DB{Name: path, Path: path, Store: st, Runner: r, close: st.Close}, nil
}

// openPostgres connects to the PostgreSQL database at url, brings its
// schema up to date (postgres.Open) and builds the fleet, configured by
// c.fleet, with rules.
func (c *CLI) openPostgres(ctx context.Context, url string, rules *standing.Set) (*DB, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	schema := cmp.Or(c.store.schema, "markov")
	cc := pcfg.ConnConfig
	name := fmt.Sprintf("postgres://%s@%s:%d/%s (schema %s)", cc.User, cc.Host, cc.Port, cc.Database, schema)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	st, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	closeAll := func() error { err := st.Close(); pool.Close(); return err }
	fcfg := c.fleet
	fcfg.Store, fcfg.Charter, fcfg.Logger, fcfg.Rules, fcfg.Tenant = st, c.Charter, c.Logger, rules, c.store.tenant
	f, err := fleet.New(fcfg)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	return &DB{Name: name, Store: st, Runner: f.Runner(), Fleet: f, close: closeAll}, nil
}

// needFleet returns an error saying command needs a PostgreSQL store
// unless the command line chose one.
func (c *CLI) needFleet(command string) error {
	if loc, _ := c.DB(); !IsPostgres(loc) {
		return fmt.Errorf("there is no fleet on SQLite (%s): %s needs a PostgreSQL store (--store postgres://…)", loc, command)
	}
	return nil
}
