// Package sqlite is a [store.Store] in one SQLite file, through the pure Go
// driver modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode with a busy timeout. Every write (save,
// delete, claim) is a BEGIN IMMEDIATE transaction, so several goroutines and
// several OS processes can share one file: writers queue on the database lock
// instead of failing, compare-and-swap revisions hold across processes, and
// a suspension claimed by one process's sweeper is not handed to another's
// within the lease. Reads run in deferred transactions and see a consistent
// snapshot without blocking writers. Within one process writers also queue
// on a semaphore, to avoid SQLite's busy polling.
//
// Config.ReadOnly opens a database for reading only (SQLite's mode=ro), for
// tools that list or inspect it with no write access to the file or its
// directory. SQLite reads a WAL database through its -shm file; in a
// directory the process cannot write, and with no -wal file present (no
// writer has the database open), the database is read as immutable.
//
// The schema is created and upgraded by [Open], with ordered migrations
// tracked in PRAGMA user_version:
//
//	CREATE TABLE machines (
//	    id          TEXT PRIMARY KEY,
//	    revision    INTEGER NOT NULL,
//	    tree        BLOB NOT NULL,
//	    history_len INTEGER NOT NULL,
//	    updated_at  INTEGER NOT NULL              -- unix microseconds, UTC
//	);
//	CREATE TABLE history (
//	    machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
//	    seq        INTEGER NOT NULL,              -- the entry's position; those after the blocks
//	    data       BLOB NOT NULL,
//	    PRIMARY KEY (machine_id, seq)
//	) WITHOUT ROWID;
//	CREATE TABLE suspensions (
//	    id            TEXT PRIMARY KEY,
//	    machine_id    TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
//	    status        TEXT NOT NULL,              -- pending, resolved, expired, cancelled
//	    kind          TEXT NOT NULL,
//	    name          TEXT NOT NULL,
//	    reason        TEXT NOT NULL,
//	    deadline      INTEGER,                    -- unix microseconds; NULL: none
//	    created_at    INTEGER,                    -- unix microseconds; NULL: zero time
//	    claimed_until INTEGER,                    -- unix microseconds; NULL: never claimed
//	    remind_at     INTEGER                     -- the next reminder, unix microseconds; NULL: none
//	);
//	CREATE INDEX suspensions_machine ON suspensions (machine_id);
//	CREATE INDEX suspensions_status_deadline ON suspensions (status, deadline);
//	CREATE TABLE replays (                        -- store.ReplayGuard
//	    key        TEXT PRIMARY KEY,
//	    expires_at INTEGER NOT NULL               -- unix microseconds
//	) WITHOUT ROWID;
//	CREATE INDEX replays_expires_at ON replays (expires_at);
//	ALTER TABLE suspensions ADD COLUMN event TEXT NOT NULL DEFAULT '';
//	CREATE INDEX suspensions_event ON suspensions (event, status) WHERE event <> '';
//	CREATE TABLE suspend_requests (               -- store.SuspendRequester
//	    id         TEXT PRIMARY KEY,
//	    machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
//	    body       BLOB NOT NULL,
//	    created_at INTEGER NOT NULL               -- unix microseconds
//	);
//	CREATE INDEX suspend_requests_machine ON suspend_requests (machine_id, created_at);
//	CREATE TABLE events (                         -- store.EventLog: the event log
//	    machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
//	    seq        INTEGER NOT NULL,              -- 1, 2, 3, ... per machine ID, after its floor
//	    data       BLOB NOT NULL,
//	    at         INTEGER NOT NULL,              -- unix microseconds
//	    PRIMARY KEY (machine_id, seq)
//	) WITHOUT ROWID;
//	CREATE TABLE suspension_feed (                -- store.EventLog: the suspension feed
//	    cursor     INTEGER PRIMARY KEY AUTOINCREMENT,
//	    suspend_id TEXT NOT NULL,
//	    machine_id TEXT NOT NULL,
//	    status     TEXT NOT NULL,
//	    kind       TEXT NOT NULL,
//	    name       TEXT NOT NULL,
//	    reason     TEXT NOT NULL,
//	    deadline   INTEGER,
//	    created_at INTEGER,
//	    at         INTEGER NOT NULL
//	);
//	CREATE INDEX suspension_feed_machine ON suspension_feed (machine_id);
//	CREATE TABLE live_events (                    -- store.EventLog: live payloads, kept a minute
//	    id         INTEGER PRIMARY KEY AUTOINCREMENT,
//	    machine_id TEXT NOT NULL,
//	    data       BLOB NOT NULL,
//	    at         INTEGER NOT NULL
//	);
//	CREATE INDEX live_events_machine ON live_events (machine_id, id);
//	CREATE INDEX live_events_at ON live_events (at);
//	ALTER TABLE machines ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0; -- store.TailLoader
//	CREATE TABLE history_blocks (                 -- the history's first entries, 128 a row
//	    machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
//	    seq        INTEGER NOT NULL,              -- its first entry's: 0, 128, 256, ... per machine
//	    data       BLOB NOT NULL,                 -- each entry after its length, a uvarint
//	    PRIMARY KEY (machine_id, seq)
//	) WITHOUT ROWID;
//	ALTER TABLE machines ADD COLUMN packed INTEGER NOT NULL DEFAULT 0; -- entries in history_blocks
//	CREATE TABLE event_floors (                   -- store.EventLog: the floor of each machine ID deleted with events
//	    machine_id TEXT PRIMARY KEY,
//	    seq        INTEGER NOT NULL               -- the last seq of its deleted logs
//	) WITHOUT ROWID;
//	CREATE TABLE parked (                         -- store.Parker: machines the sweeper could not run
//	    machine_id TEXT PRIMARY KEY REFERENCES machines(id) ON DELETE CASCADE,
//	    revision   INTEGER NOT NULL,              -- the machine's when parked; a save since unparks it
//	    errors     BLOB NOT NULL,                 -- a JSON array of strings, oldest first
//	    at         INTEGER NOT NULL               -- unix microseconds
//	) WITHOUT ROWID;
//	ALTER TABLE replays ADD COLUMN outcome BLOB;  -- store.OutcomeKeeper
//	CREATE TABLE effects (                        -- store.EffectJournal
//	    key        TEXT PRIMARY KEY,
//	    machine_id TEXT NOT NULL,
//	    name       TEXT NOT NULL,
//	    digest     TEXT NOT NULL,
//	    status     TEXT NOT NULL,                 -- started, done, failed
//	    result     BLOB,
//	    started_at INTEGER NOT NULL,              -- unix microseconds
//	    ended_at   INTEGER                        -- unix microseconds; NULL: not ended
//	) WITHOUT ROWID;
//	CREATE INDEX effects_machine ON effects (machine_id);
//	ALTER TABLE suspension_feed ADD COLUMN machine BLOB; -- store.MachineChange, JSON; NULL: a suspension change
//
// Watchers ([Store.Subscribe]) in this process are woken at once when a
// save commits or a payload is published; those in other processes find
// out by polling, every 20ms while things happen, backing off to once a
// second when nothing does. Live payloads cross processes through the
// live_events table, which keeps each for a minute — written only while a
// machine subscription is open somewhere: every store with one holds a
// shared lock (flock) on the sidecar file Path+"-watch", which a
// publisher probes first. With nobody watching, publishing writes
// nothing. A read-only store registers its subscriptions through the
// sidecar when it exists (a writer creates it when it opens the
// database); without it they get the log only. A writer that cannot open
// the sidecar, or runs on a system without flock, always writes.
//
// The store is a machine lock for package durable (durable.Locker, through
// [Store.LockMachine]): on Linux, an open file description lock on one byte
// per machine of the sidecar file Path+"-locks", which excludes every other
// store on the database, in this process or another on the host, and goes
// with its process however that ends. A durable.Runner holds it for the
// whole of a run, so two processes never run one machine at once: a second
// resume of a suspension waits, then finds it resolved having run nothing.
// Elsewhere it locks nothing beyond the process.
//
// A save costs one machine row update, one insert per appended history
// entry and a rewrite of the machine's few suspension rows: it does not grow
// with the history. Once a machine's history rows reach 128 entries, the
// save packs them into one history_blocks row instead (reading the rows it
// packs, deleting them), so that a load reads a row per 128 entries and
// fewer than 128 single rows: reading a row costs much more than its
// bytes, and one per entry made a load of a long history several times
// slower than decoding it.
//
// Event sequence numbers never repeat for a machine ID ([store.EventLog]):
// a delete records the last one of the machine's log in event_floors,
// and the first save to log events in an empty log reads the ID's floor
// there. A save to a log that has entries reads nothing more than before.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/markov-agents/markov/internal/livehub"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// Config configures [Open].
type Config struct {
	// Path is the database file, created if missing. Required. It must not
	// contain '?'; the "-wal" and "-shm" files SQLite keeps beside it, and
	// the store's "-watch" and "-locks" files, belong to the database too.
	Path string
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection or process before failing. Zero means 5 seconds.
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous setting: "FULL" (the default)
	// syncs the WAL on every commit, so a save that returned survives a
	// power loss; "NORMAL" syncs only at checkpoints, which is faster and
	// still survives a crash of the process, but not of the machine.
	Synchronous string
	// Now is the clock used for Snapshot.UpdatedAt; nil means time.Now.
	Now func() time.Time
	// ReadOnly opens the database read-only (SQLite's mode=ro): the file
	// must exist with the current schema, the process needs no write
	// access to it, and Save, Delete, ClaimExpired and Remember fail with
	// [ErrReadOnly]. Listing and inspecting tools use it. (Without it, a
	// database already at [SchemaVersion] is opened without a write too;
	// only an upgrade writes.)
	ReadOnly bool
	// MmapSize is SQLite's mmap_size on every connection: how many bytes
	// of the database file it reads through a memory map rather than a
	// read call per page. Zero means [DefaultMmapSize]; a negative value
	// turns the map off. See DefaultMmapSize for what it changes.
	MmapSize int64
}

// DefaultMmapSize is Config.MmapSize when zero. History blocks span
// pages, and each connection's page cache is thrown away whenever another
// connection writes: without a map, a cold load of a long history reads
// it page by page, a system call each. The map changes reads only: SQLite
// still writes and syncs through the file (this build has no
// SQLITE_MMAP_READWRITE), so durability is as before, and pages still in
// the WAL are read from it as before. The map is address space, shared
// with the OS page cache, not memory of its own. Its one cost is SQLite's
// documented caveat: an I/O error while reading the mapped file (a failing
// disk, or another program truncating the file) ends the process with
// SIGBUS instead of failing the read; set a negative Config.MmapSize where
// that matters more than load speed.
const DefaultMmapSize = 256 << 20

// ErrReadOnly reports a write to a store opened with Config.ReadOnly.
var ErrReadOnly = errors.New("sqlite: store is read-only")

// Store is a [store.Store] backed by one SQLite file. Its methods are safe
// for concurrent use; see the package documentation for several processes.
type Store struct {
	db       *sql.DB
	now      func() time.Time
	readOnly bool
	// writeSem serializes this process's write transactions.
	writeSem chan struct{}
	// sync is the synchronous setting (live payloads are committed at
	// NORMAL: liveSync).
	sync string
	// stmts keeps the write path's statements prepared.
	stmts stmtCache
	// hub wakes this process's subscriptions (events.go); pruned is when
	// live_events was last pruned (unix microseconds).
	hub    livehub.Hub
	pruned atomic.Int64
	// watch tells whether any process has a machine subscription open
	// (watchers.go).
	watch *watchers
	// locks are the machine locks (locks.go).
	locks *machineLocks
}

// Store implements the core interface and every optional capability.
var _ backend.Database = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path and brings its
// schema up to date. A database written by a newer version of this package
// (a schema version it does not know) is refused. Opening a database that
// is up to date reads its schema version and writes nothing, so it needs
// no write access; with cfg.ReadOnly, a database that is not up to date is
// refused rather than upgraded.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	if strings.Contains(cfg.Path, "?") {
		return nil, fmt.Errorf("sqlite: open %q: path must not contain '?'", cfg.Path)
	}
	busy := cfg.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	syncMode := strings.ToUpper(cfg.Synchronous)
	switch syncMode {
	case "":
		syncMode = "FULL"
	case "FULL", "NORMAL", "EXTRA", "OFF":
	default:
		return nil, fmt.Errorf("sqlite: open %q: unknown synchronous setting %q", cfg.Path, cfg.Synchronous)
	}
	// _txlock=immediate makes every read-write BeginTx a BEGIN IMMEDIATE;
	// read-only ones stay deferred. The pragmas run on every new connection.
	// A read-only store opens a "file:" URI with mode=ro and leaves the
	// journal mode as the writers set it.
	dsn := cfg.Path + "?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(" + syncMode + ")&"
	if cfg.ReadOnly {
		dsn = "file:" + (&url.URL{Path: cfg.Path}).EscapedPath() + "?mode=ro&"
	}
	mmap := cfg.MmapSize
	switch {
	case mmap == 0:
		mmap = DefaultMmapSize
	case mmap < 0:
		mmap = 0
	}
	dsn += fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=mmap_size(%d)", busy.Milliseconds(), mmap)
	s, err := open(ctx, cfg, dsn)
	if err == nil {
		s.sync = syncMode
	}
	if err != nil && cfg.ReadOnly {
		// SQLite reads a WAL database through its -shm file, which it
		// cannot create in a directory the process may not write. With no
		// -wal file beside the database no writer has it open, and every
		// commit is in the file itself: read it as immutable.
		if _, statErr := os.Stat(cfg.Path + "-wal"); errors.Is(statErr, os.ErrNotExist) {
			s, err = open(ctx, cfg, dsn+"&immutable=1")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", cfg.Path, err)
	}
	return s, nil
}

// open opens the store at dsn and migrates it.
func open(ctx context.Context, cfg Config, dsn string) (*Store, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, now: cfg.Now, readOnly: cfg.ReadOnly, writeSem: make(chan struct{}, 1), stmts: stmtCache{db: db}}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	s.watch = openWatchers(cfg.Path, cfg.ReadOnly)
	s.locks = openMachineLocks(cfg.Path, cfg.ReadOnly)
	return s, nil
}

// migrations are applied in order; migration i moves user_version from i to
// i+1. Never edit one that has shipped: append a new one.
var migrations = [...]string{
	`CREATE TABLE machines (
		id          TEXT PRIMARY KEY,
		revision    INTEGER NOT NULL,
		tree        BLOB NOT NULL,
		history_len INTEGER NOT NULL,
		updated_at  INTEGER NOT NULL
	);
	CREATE TABLE history (
		machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
		seq        INTEGER NOT NULL,
		data       BLOB NOT NULL,
		PRIMARY KEY (machine_id, seq)
	) WITHOUT ROWID;
	CREATE TABLE suspensions (
		id            TEXT PRIMARY KEY,
		machine_id    TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
		status        TEXT NOT NULL,
		kind          TEXT NOT NULL,
		name          TEXT NOT NULL,
		reason        TEXT NOT NULL,
		deadline      INTEGER,
		created_at    INTEGER,
		claimed_until INTEGER
	);
	CREATE INDEX suspensions_machine ON suspensions (machine_id);
	CREATE INDEX suspensions_status_deadline ON suspensions (status, deadline);`,
	// 2: statuses are store.Statuses. Databases written before kept
	// free-form statuses; those that are none of the four left pending, and
	// the index said "resolved" for every way out of pending.
	`UPDATE suspensions SET status = 'resolved'
		WHERE status NOT IN ('pending', 'resolved', 'expired', 'cancelled');`,
	// 3: the replay guard's records.
	`CREATE TABLE replays (
		key        TEXT PRIMARY KEY,
		expires_at INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX replays_expires_at ON replays (expires_at);`,
	// 4: the event a suspension waits for (store.Suspension.Event), and
	// caller suspend requests (store.SuspendRequester).
	`ALTER TABLE suspensions ADD COLUMN event TEXT NOT NULL DEFAULT '';
	CREATE INDEX suspensions_event ON suspensions (event, status) WHERE event <> '';
	CREATE TABLE suspend_requests (
		id         TEXT PRIMARY KEY,
		machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
		body       BLOB NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE INDEX suspend_requests_machine ON suspend_requests (machine_id, created_at);`,
	// 5: the event log, the suspension feed and the live events
	// (store.EventLog).
	`CREATE TABLE events (
		machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
		seq        INTEGER NOT NULL,
		data       BLOB NOT NULL,
		at         INTEGER NOT NULL,
		PRIMARY KEY (machine_id, seq)
	) WITHOUT ROWID;
	CREATE TABLE suspension_feed (
		cursor     INTEGER PRIMARY KEY AUTOINCREMENT,
		suspend_id TEXT NOT NULL,
		machine_id TEXT NOT NULL,
		status     TEXT NOT NULL,
		kind       TEXT NOT NULL,
		name       TEXT NOT NULL,
		reason     TEXT NOT NULL,
		deadline   INTEGER,
		created_at INTEGER,
		at         INTEGER NOT NULL
	);
	CREATE INDEX suspension_feed_machine ON suspension_feed (machine_id);
	CREATE TABLE live_events (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		machine_id TEXT NOT NULL,
		data       BLOB NOT NULL,
		at         INTEGER NOT NULL
	);
	CREATE INDEX live_events_machine ON live_events (machine_id, id);
	CREATE INDEX live_events_at ON live_events (at);`,
	// 6: the machine's incarnation (store.Snapshot.Incarnation); machines
	// created before keep 0, which no create gives.
	`ALTER TABLE machines ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;`,
	// 7: history blocks (history.go); the rows of machines saved before
	// are packed by their next saves.
	`CREATE TABLE history_blocks (
		machine_id TEXT NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
		seq        INTEGER NOT NULL,
		data       BLOB NOT NULL,
		PRIMARY KEY (machine_id, seq)
	) WITHOUT ROWID;
	ALTER TABLE machines ADD COLUMN packed INTEGER NOT NULL DEFAULT 0;`,
	// 8: the floors of the event log's sequence numbers (store.EventLog):
	// the last sequence number of the logs deleted with the machines of
	// an ID. IDs deleted before keep none: their logs are gone.
	`CREATE TABLE event_floors (
		machine_id TEXT PRIMARY KEY,
		seq        INTEGER NOT NULL
	) WITHOUT ROWID;`,
	// 9: the machines the sweeper could not run (store.Parker).
	`CREATE TABLE parked (
		machine_id TEXT PRIMARY KEY REFERENCES machines(id) ON DELETE CASCADE,
		revision   INTEGER NOT NULL,
		errors     BLOB NOT NULL,
		at         INTEGER NOT NULL
	) WITHOUT ROWID;`,
	// 10: the outcome kept with a replay record (store.OutcomeKeeper).
	`ALTER TABLE replays ADD COLUMN outcome BLOB;`,
	// 11: the effect journal (store.EffectJournal).
	`CREATE TABLE effects (
		key        TEXT PRIMARY KEY,
		machine_id TEXT NOT NULL,
		name       TEXT NOT NULL,
		digest     TEXT NOT NULL,
		status     TEXT NOT NULL,
		result     BLOB,
		started_at INTEGER NOT NULL,
		ended_at   INTEGER
	) WITHOUT ROWID;
	CREATE INDEX effects_machine ON effects (machine_id);`,
	// 12: the records of protocol packages (store.RecordKeeper).
	`CREATE TABLE records (
		kind       TEXT NOT NULL,
		key        TEXT NOT NULL,
		data       BLOB NOT NULL,
		version    INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		PRIMARY KEY (kind, key)
	) WITHOUT ROWID;`,
	// 13: the audit log (store.AuditLog), hash-chained, and its head,
	// which a trigger keeps: an append is one INSERT.
	`CREATE TABLE audit_log (
		seq        INTEGER PRIMARY KEY,
		machine_id TEXT NOT NULL,
		entry      BLOB NOT NULL,
		prev       BLOB NOT NULL,
		hash       BLOB NOT NULL,
		sig        BLOB NOT NULL
	);
	CREATE TABLE audit_head (
		id   INTEGER PRIMARY KEY CHECK (id = 1),
		seq  INTEGER NOT NULL,
		hash BLOB NOT NULL
	);
	INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, x'');
	CREATE TRIGGER audit_head_follows AFTER INSERT ON audit_log BEGIN
		UPDATE audit_head SET seq = NEW.seq, hash = NEW.hash WHERE id = 1;
	END;`,
	// 14: the uses of standing approval rules (store.RuleUses): one row
	// per use, and a count per rule.
	`CREATE TABLE rule_uses (
		rule       TEXT NOT NULL,
		suspend_id TEXT NOT NULL,
		machine_id TEXT NOT NULL,
		PRIMARY KEY (rule, suspend_id)
	);
	CREATE TABLE rule_counts (
		rule TEXT PRIMARY KEY,
		used INTEGER NOT NULL
	);`,
	// 15: a suspension's next reminder (store.Suspension.RemindAt), unix
	// microseconds, NULL: none; ClaimExpired hands it out as it does a
	// deadline.
	`ALTER TABLE suspensions ADD COLUMN remind_at INTEGER;
	CREATE INDEX suspensions_status_remind ON suspensions (status, remind_at);`,
	// 16: machine changes in the suspension feed (store.MachineChange,
	// JSON; NULL for a suspension change).
	`ALTER TABLE suspension_feed ADD COLUMN machine BLOB;`,
}

// SchemaVersion is the schema version this package writes: the number of
// migrations, kept in the database's PRAGMA user_version.
const SchemaVersion = len(migrations)

// migrate brings the schema up to date. It reads the version first and
// opens a write transaction only when there is something to migrate, so
// that an up-to-date database needs no write access.
func (s *Store) migrate(ctx context.Context) error {
	v, err := schemaVersion(ctx, s.db)
	switch {
	case err != nil || v == len(migrations):
		return err
	case s.readOnly:
		return fmt.Errorf("schema version %d is older than this package's %d: open the database once with write access to upgrade it", v, len(migrations))
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		// Another process may have migrated since the read above.
		v, err := schemaVersion(ctx, tx)
		if err != nil {
			return err
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		if v < len(migrations) {
			// PRAGMA takes no parameters; the value is our own integer.
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
				return fmt.Errorf("write schema version: %w", err)
			}
		}
		return nil
	})
}

// schemaVersion reads PRAGMA user_version and refuses a version newer than
// this package's.
func schemaVersion(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if v > len(migrations) {
		return 0, fmt.Errorf("schema version %d is newer than this package's %d", v, len(migrations))
	}
	return v, nil
}

// write runs fn in a BEGIN IMMEDIATE transaction, committing if it returns
// nil and rolling back otherwise. A read-only store refuses at once.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeOn(ctx, false, fn)
}

// writeOn is write; with live set, its commit does not wait for the disk
// (liveSync).
func (s *Store) writeOn(ctx context.Context, live bool, fn func(tx *sql.Tx) error) error {
	if s.readOnly {
		return ErrReadOnly
	}
	select {
	case s.writeSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writeSem }()
	if live && (s.sync == "FULL" || s.sync == "EXTRA") {
		return s.liveSync(ctx, fn)
	}
	return commit(ctx, s.db, fn)
}

// commit runs fn in a transaction of db, committing if it returns nil.
func commit(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// liveSync runs fn in a transaction whose commit does not wait for the
// disk, for live payloads: they are no record (the event log is), a
// process crash loses none of them, and the next synced commit carries
// them. It lowers the connection's synchronous setting to NORMAL for the
// transaction, on a connection of the pool — the one the saves use, whose
// page cache a write on another connection would throw away — and puts it
// back after; a connection whose setting cannot be put back is discarded.
func (s *Store) liveSync(ctx context.Context, fn func(tx *sql.Tx) error) error {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `PRAGMA synchronous=NORMAL`); err != nil {
		return err
	}
	err = commit(ctx, c, fn)
	if _, resetErr := c.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous=`+s.sync); resetErr != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(err, resetErr)
	}
	return err
}

// read runs fn in a deferred (snapshot) transaction.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to undo
	return fn(tx)
}

// micros encodes a time as unix microseconds, NULL for the zero time.
func micros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func fromMicros(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.UnixMicro(n.Int64).UTC()
}

// someRows returns none if res affected no row.
func someRows(res sql.Result, none error) error {
	n, err := res.RowsAffected()
	if err == nil && n == 0 {
		err = none
	}
	return err
}

// Load implements [store.Store].
func (s *Store) Load(ctx context.Context, machineID string) (*store.Snapshot, error) {
	return s.LoadTail(ctx, machineID, 0)
}

// LoadTail implements [store.TailLoader]: it reads the machine's row, the
// last sequence number of its event log (Snapshot.EventSeq; the ID's
// floor when the log is empty) and the history rows from seq from on, in
// one read transaction.
func (s *Store) LoadTail(ctx context.Context, machineID string, from int) (*store.Snapshot, error) {
	snap := &store.Snapshot{MachineID: machineID}
	if err := store.CheckID(machineID); err != nil {
		return nil, fmt.Errorf("sqlite: load machine %q: %w", machineID, err)
	}
	if from < 0 {
		return nil, fmt.Errorf("sqlite: load machine %q: %w: history from %d", machineID, store.ErrInvalid, from)
	}
	err := s.read(ctx, func(sqlTx *sql.Tx) error {
		tx := cachedTx{tx: sqlTx, cache: &s.stmts}
		var n, packed int64
		var updated int64
		err := tx.QueryRowContext(ctx, `SELECT revision, tree, history_len, packed, updated_at, incarnation,
			EXISTS (SELECT 1 FROM suspend_requests WHERE machine_id = ?1),
			(SELECT coalesce(max(seq), (SELECT seq FROM event_floors WHERE machine_id = ?1), 0) FROM events WHERE machine_id = ?1)
			FROM machines WHERE id = ?1`, machineID).
			Scan(&snap.Revision, &snap.Tree, &n, &packed, &updated, &snap.Incarnation, &snap.SuspendRequests, &snap.EventSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		snap.Tree = backend.NonNil(snap.Tree)
		snap.UpdatedAt = time.UnixMicro(updated).UTC()
		snap.HistoryFrom = int(min(int64(from), n))
		snap.History, err = readHistory(ctx, tx, machineID, int64(snap.HistoryFrom), n, packed)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: load machine %q: %w", machineID, err)
	}
	return snap, nil
}

// maxHistoryRows is how many history rows one INSERT statement carries
// (3 parameters each, well under SQLite's parameter limit).
const maxHistoryRows = 256

// Save implements [store.Store].
func (s *Store) Save(ctx context.Context, sv store.Save) (int64, error) {
	rev, _, err := s.SaveReporting(ctx, sv)
	return rev, err
}

// SaveReporting implements [store.RequestReporter].
func (s *Store) SaveReporting(ctx context.Context, sv store.Save) (rev int64, requests bool, err error) {
	if err := sv.Validate(); err != nil {
		return 0, false, err
	}
	var changed bool
	err = s.write(ctx, func(sqlTx *sql.Tx) error {
		tx := cachedTx{tx: sqlTx, cache: &s.stmts}
		rev = sv.Revision + 1
		now := s.now().UnixMicro()
		was, err := writeMachine(ctx, tx, sv, rev, now)
		if err != nil {
			return err
		}
		requests = was.requests
		if err := appendHistory(ctx, tx, sv.MachineID, was.histLen, was.packed, sv.Append); err != nil {
			return err
		}
		if err := appendEvents(ctx, tx, sv.MachineID, was.events, sv.Events, now); err != nil {
			return err
		}
		if err := appendAudit(ctx, tx, sv.Audit); err != nil {
			return err
		}
		if was.indexed || len(sv.Suspensions) > 0 {
			if changed, err = replaceSuspensions(ctx, tx, sv, now); err != nil {
				return err
			}
		}
		for _, e := range sv.Effects {
			if _, err := endEffect(ctx, tx, e, now); err != nil {
				return err
			}
		}
		if sv.Finish != nil {
			changed = true
			return feedMachine(ctx, tx, sv.MachineID, store.MachineChange{Event: store.MachineFinished, Revision: rev, Answer: sv.Finish.Answer}, now)
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("sqlite: save machine %q: %w", sv.MachineID, err)
	}
	if len(sv.Events) > 0 {
		s.hub.Notify(sv.MachineID)
	}
	if changed {
		s.hub.Notify(feedKey)
	}
	return rev, requests, nil
}

// machineRow is what a save needs to know of the machine as it was.
type machineRow struct {
	histLen, packed int64 // history entries, and those of them in blocks
	events          int64 // the event log's last sequence number, 0 if it is empty
	requests        bool  // a suspend request waits (store.RequestReporter)
	indexed         bool  // the suspension index holds entries of it
}

// writeMachine writes the machine's row for sv at revision rev and
// returns what the save needs of it as it was. A save on the stored
// revision, the common case, takes one statement (an UPDATE returning
// the rest); a new machine, or a save that fails its revision check, reads
// the row first.
func writeMachine(ctx context.Context, tx txer, sv store.Save, rev, now int64) (machineRow, error) {
	var was machineRow
	if sv.Revision != 0 {
		err := tx.QueryRowContext(ctx, `UPDATE machines SET revision = ?1, tree = ?2, history_len = history_len + ?3, updated_at = ?4
			WHERE id = ?5 AND revision = ?6
			RETURNING history_len - ?3, packed, (SELECT coalesce(max(seq), 0) FROM events WHERE machine_id = ?5),
			EXISTS (SELECT 1 FROM suspend_requests WHERE machine_id = ?5), EXISTS (SELECT 1 FROM suspensions WHERE machine_id = ?5)`,
			rev, backend.NonNil(sv.Tree), len(sv.Append), now, sv.MachineID, sv.Revision).
			Scan(&was.histLen, &was.packed, &was.events, &was.requests, &was.indexed)
		if err == nil {
			if after := backend.PackedAfter(was.histLen, was.packed, len(sv.Append)); after != was.packed {
				_, err = tx.ExecContext(ctx, `UPDATE machines SET packed = ? WHERE id = ?`, after, sv.MachineID)
			}
			return was, err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return was, err
		}
	}
	var stored int64
	err := tx.QueryRowContext(ctx, `SELECT revision FROM machines WHERE id = ?`, sv.MachineID).Scan(&stored)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return was, err
	}
	if err := store.CheckRevision(sv.Revision, stored, exists); err != nil {
		return was, err
	}
	// A new machine: no history, events, requests or index entries yet
	// (theirs go with the machine's row).
	_, err = tx.ExecContext(ctx, `INSERT INTO machines (id, revision, tree, history_len, packed, updated_at, incarnation) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		sv.MachineID, rev, backend.NonNil(sv.Tree), len(sv.Append), backend.PackedAfter(0, 0, len(sv.Append)), now, store.NewIncarnation())
	return was, err
}

// replaceSuspensions replaces the machine's index entries, keeping the claim
// lease of suspend IDs that stay, and adds the changes to the suspension
// feed; it reports whether there were any.
func replaceSuspensions(ctx context.Context, tx txer, sv store.Save, now int64) (changed bool, err error) {
	type old struct {
		status string
		claim  sql.NullInt64
	}
	was := map[string]old{}
	rows, err := tx.QueryContext(ctx, `SELECT id, status, claimed_until FROM suspensions WHERE machine_id = ?`, sv.MachineID)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var id string
		var o old
		if err := rows.Scan(&id, &o.status, &o.claim); err != nil {
			rows.Close()
			return false, err
		}
		was[id] = o
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	if len(was) > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM suspensions WHERE machine_id = ?`, sv.MachineID); err != nil {
			return false, err
		}
	}
	for _, sp := range sv.Suspensions {
		o, stayed := was[sp.ID]
		res, err := tx.ExecContext(ctx, `INSERT INTO suspensions
			(id, machine_id, status, kind, name, reason, deadline, created_at, claimed_until, event, remind_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			sp.ID, sv.MachineID, string(sp.Status), sp.Kind, sp.Name, sp.Reason,
			micros(sp.Deadline), micros(sp.CreatedAt), o.claim, sp.Event, micros(sp.RemindAt))
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return false, err
		} else if n == 0 {
			return false, fmt.Errorf("%w: suspend ID %q belongs to another machine", store.ErrInvalid, sp.ID)
		}
		if stayed && o.status == string(sp.Status) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO suspension_feed
			(suspend_id, machine_id, status, kind, name, reason, deadline, created_at, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sp.ID, sv.MachineID, string(sp.Status), sp.Kind, sp.Name, sp.Reason,
			micros(sp.Deadline), micros(sp.CreatedAt), now); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// Delete implements [store.Store].
func (s *Store) Delete(ctx context.Context, machineID string) error {
	if err := store.CheckID(machineID); err != nil {
		return fmt.Errorf("sqlite: delete machine %q: %w", machineID, err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		// The log's last sequence number becomes the ID's floor, before
		// the log goes (store.EventLog). A machine that does not exist
		// has no log: nothing is recorded, and the delete fails below.
		if _, err := tx.ExecContext(ctx, `INSERT INTO event_floors (machine_id, seq)
			SELECT machine_id, max(seq) FROM events WHERE machine_id = ? GROUP BY machine_id
			ON CONFLICT (machine_id) DO UPDATE SET seq = max(seq, excluded.seq)`, machineID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM machines WHERE id = ?`, machineID)
		if err != nil {
			return err
		}
		if err := someRows(res, store.ErrNotFound); err != nil {
			return err
		}
		// ON DELETE CASCADE covers these; delete explicitly all the same, in
		// case foreign keys are off on this connection.
		for _, q := range []string{`DELETE FROM history WHERE machine_id = ?`, `DELETE FROM history_blocks WHERE machine_id = ?`, `DELETE FROM suspend_requests WHERE machine_id = ?`, `DELETE FROM suspensions WHERE machine_id = ?`,
			`DELETE FROM events WHERE machine_id = ?`, `DELETE FROM suspension_feed WHERE machine_id = ?`, `DELETE FROM live_events WHERE machine_id = ?`, `DELETE FROM effects WHERE machine_id = ?`, `DELETE FROM parked WHERE machine_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, machineID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete machine %q: %w", machineID, err)
	}
	return nil
}

// ListMachines implements [store.MachineLister].
func (s *Store) ListMachines(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM machines ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list machines: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: list machines: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list machines: %w", err)
	}
	return ids, nil
}

const suspensionColumns = `id, machine_id, status, kind, name, reason, deadline, created_at, claimed_until, event, remind_at`

// suspensionOrder is store.CompareSuspensions in SQL (NULL created_at, the
// zero time, sorts first in SQLite).
const suspensionOrder = ` ORDER BY deadline IS NULL, deadline, created_at, id`

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func querySuspensions(ctx context.Context, q querier, query string, args ...any) ([]store.Suspension, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Suspension
	for rows.Next() {
		var sp store.Suspension
		var deadline, created, claimed, remind sql.NullInt64
		if err := rows.Scan(&sp.ID, &sp.MachineID, &sp.Status, &sp.Kind, &sp.Name, &sp.Reason, &deadline, &created, &claimed, &sp.Event, &remind); err != nil {
			return nil, err
		}
		sp.Deadline, sp.CreatedAt, sp.ClaimedUntil, sp.RemindAt = fromMicros(deadline), fromMicros(created), fromMicros(claimed), fromMicros(remind)
		out = append(out, sp)
	}
	return out, rows.Err()
}

// FindSuspension implements [store.Store].
func (s *Store) FindSuspension(ctx context.Context, suspendID string) (store.Suspension, error) {
	if err := store.CheckID(suspendID); err != nil {
		return store.Suspension{}, fmt.Errorf("sqlite: find suspension %q: %w", suspendID, err)
	}
	got, err := querySuspensions(ctx, s.db, `SELECT `+suspensionColumns+` FROM suspensions WHERE id = ?`, suspendID)
	if err == nil && len(got) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Suspension{}, fmt.Errorf("sqlite: find suspension %q: %w", suspendID, err)
	}
	return got[0], nil
}

// ListSuspensions implements [store.Store].
func (s *Store) ListSuspensions(ctx context.Context, f store.Filter) ([]store.Suspension, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: list suspensions: %w", err)
	}
	if !f.Selective() {
		return nil, nil
	}
	var where []string
	var args []any
	if f.MachineID != "" {
		where, args = append(where, "machine_id = ?"), append(args, f.MachineID)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	if !f.DeadlineBefore.IsZero() {
		where, args = append(where, "deadline < ?"), append(args, f.DeadlineBefore.UnixMicro())
	}
	if f.Event != "" {
		where, args = append(where, "event = ?"), append(args, f.Event)
	}
	q := `SELECT ` + suspensionColumns + ` FROM suspensions`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += suspensionOrder
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	got, err := querySuspensions(ctx, &s.stmts, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list suspensions: %w", err)
	}
	return got, nil
}

// maxClaimRows is how many suspend IDs one claim UPDATE carries.
const maxClaimRows = 500

// ClaimExpired implements [store.ExpiryClaimer].
func (s *Store) ClaimExpired(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]store.Suspension, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("sqlite: claim expired: %w: lease %v is not positive", store.ErrInvalid, lease)
	}
	if limit <= 0 {
		limit = -1 // no limit
	}
	nowUS := now.UnixMicro()
	until := now.Add(lease).UnixMicro()
	var out []store.Suspension
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = querySuspensions(ctx, tx, `SELECT `+suspensionColumns+` FROM suspensions
			WHERE status = ? AND (deadline <= ? OR remind_at <= ?) AND (claimed_until IS NULL OR claimed_until <= ?)`+
			suspensionOrder+` LIMIT ?`, string(store.StatusPending), nowUS, nowUS, nowUS, limit)
		if err != nil || len(out) == 0 {
			return err
		}
		for i := range out {
			out[i].ClaimedUntil = time.UnixMicro(until).UTC()
		}
		for start := 0; start < len(out); start += maxClaimRows {
			chunk := out[start:min(start+maxClaimRows, len(out))]
			args := make([]any, 0, len(chunk)+1)
			args = append(args, until)
			for _, sp := range chunk {
				args = append(args, sp.ID)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE suspensions SET claimed_until = ? WHERE id IN (?`+
				strings.Repeat(", ?", len(chunk)-1)+`)`, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim expired: %w", err)
	}
	return out, nil
}

// Remember implements [store.ReplayGuard], on the store's clock
// (Config.Now): one write transaction deletes the expired records and
// inserts key unless a live record of it is left.
func (s *Store) Remember(ctx context.Context, key string, expiresAt time.Time) (bool, error) {
	if !store.ValidID(key) {
		return false, fmt.Errorf("sqlite: remember: %w: the key is not a valid ID", store.ErrInvalid)
	}
	fresh := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM replays WHERE expires_at <= ?`, s.now().UnixMicro()); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO replays (key, expires_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
			key, expiresAt.UnixMicro())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		fresh = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: remember: %w", err)
	}
	return fresh, nil
}

// KeepOutcome implements [store.OutcomeKeeper], on the store's clock.
func (s *Store) KeepOutcome(ctx context.Context, key string, outcome []byte) error {
	if !store.ValidID(key) {
		return fmt.Errorf("sqlite: keep outcome: %w: the key is not a valid ID", store.ErrInvalid)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE replays SET outcome = ? WHERE key = ? AND expires_at > ?`, outcome, key, s.now().UnixMicro())
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: keep outcome: %w", err)
	}
	return nil
}

// Outcome implements [store.OutcomeKeeper], on the store's clock.
func (s *Store) Outcome(ctx context.Context, key string) ([]byte, error) {
	if !store.ValidID(key) {
		return nil, fmt.Errorf("sqlite: outcome: %w: the key is not a valid ID", store.ErrInvalid)
	}
	var out []byte
	err := s.db.QueryRowContext(ctx, `SELECT outcome FROM replays WHERE key = ? AND expires_at > ?`, key, s.now().UnixMicro()).Scan(&out)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: outcome: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: outcome: %w", err)
	}
	return out, nil
}

// Forget implements [store.ReplayGuard].
func (s *Store) Forget(ctx context.Context, key string) error {
	if !store.ValidID(key) {
		return fmt.Errorf("sqlite: forget: %w: the key is not a valid ID", store.ErrInvalid)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM replays WHERE key = ?`, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: forget: %w", err)
	}
	return nil
}

// BeginEffect implements [store.EffectJournal].
func (s *Store) BeginEffect(ctx context.Context, e store.Effect) (store.Effect, bool, error) {
	if err := store.CheckEffect(e); err != nil {
		return store.Effect{}, false, fmt.Errorf("sqlite: begin effect: %w", err)
	}
	created := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO effects (key, machine_id, name, digest, status, started_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
			e.Key, e.MachineID, e.Name, e.Digest, string(store.EffectStarted), s.now().UnixMicro())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		created = n == 1
		if err != nil {
			return err
		}
		return readEffect(ctx, tx, &e)
	})
	if err != nil {
		return store.Effect{}, false, fmt.Errorf("sqlite: begin effect: %w", err)
	}
	return e, created, nil
}

// readEffect reads the entry of e.Key into e: sql.ErrNoRows if there is
// none.
func readEffect(ctx context.Context, tx txer, e *store.Effect) error {
	var status string
	var started int64
	var ended sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT machine_id, name, digest, status, result, started_at, ended_at FROM effects WHERE key = ?`, e.Key).
		Scan(&e.MachineID, &e.Name, &e.Digest, &status, &e.Result, &started, &ended)
	e.Status, e.StartedAt, e.EndedAt = store.EffectStatus(status), time.UnixMicro(started).UTC(), fromMicros(ended)
	return err
}

// RunEffectTx implements [store.TxEffectJournal]: fn's tx is the *sql.Tx
// of a BEGIN IMMEDIATE transaction, which holds the database's write
// lock until it ends — keep fn short, and write through tx alone.
func (s *Store) RunEffectTx(ctx context.Context, e store.Effect, fn func(ctx context.Context, tx any) ([]byte, error)) (store.Effect, bool, error) {
	if err := store.CheckEffectTx(e); err != nil {
		return store.Effect{}, false, fmt.Errorf("sqlite: run effect: %w", err)
	}
	var fnErr error
	ran := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		if e.Key != "" {
			err := readEffect(ctx, tx, &e)
			if !errors.Is(err, sql.ErrNoRows) {
				return err // found (nil), or failed
			}
		}
		result, err := fn(ctx, tx)
		if err != nil {
			fnErr = err
			return err
		}
		now := s.now().UnixMicro()
		e.Status, e.Result, e.StartedAt, e.EndedAt = store.EffectDone, result, time.UnixMicro(now).UTC(), time.UnixMicro(now).UTC()
		ran = true
		if e.Key == "" {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO effects (key, machine_id, name, digest, status, result, started_at, ended_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, e.Key, e.MachineID, e.Name, e.Digest, string(store.EffectDone), result, now, now)
		return err
	})
	switch {
	case fnErr != nil:
		return store.Effect{}, false, fnErr
	case err != nil:
		return store.Effect{}, false, fmt.Errorf("sqlite: run effect %q: %w", e.Key, err)
	}
	return e, ran, nil
}

// EndEffect implements [store.EffectJournal].
func (s *Store) EndEffect(ctx context.Context, key string, status store.EffectStatus, result []byte) error {
	if err := store.CheckEffectEnd(key, status); err != nil {
		return fmt.Errorf("sqlite: end effect: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := endEffect(ctx, tx, store.EffectEnd{Key: key, Status: status, Result: result}, s.now().UnixMicro())
		if err != nil {
			return err
		}
		return someRows(res, store.ErrConflict)
	})
	if err != nil {
		return fmt.Errorf("sqlite: end effect %q: %w", key, err)
	}
	return nil
}

// endEffect records the outcome end of a started effect at now (an
// effect that is not started is left as it is: no row affected).
func endEffect(ctx context.Context, tx txer, end store.EffectEnd, now int64) (sql.Result, error) {
	return tx.ExecContext(ctx, `UPDATE effects SET status = ?, result = ?, ended_at = ? WHERE key = ? AND status = ?`,
		string(end.Status), end.Result, now, end.Key, string(store.EffectStarted))
}

// ForgetEffect implements [store.EffectJournal].
func (s *Store) ForgetEffect(ctx context.Context, key string) error {
	if !store.ValidID(key) {
		return fmt.Errorf("sqlite: forget effect: %w: effect key %q", store.ErrInvalid, key)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM effects WHERE key = ?`, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: forget effect: %w", err)
	}
	return nil
}

// Ping implements [store.Pinger]: it reads the schema version.
func (s *Store) Ping(ctx context.Context) error {
	return backend.Ping("sqlite", SchemaVersion, s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan)
}

// Close closes the database.
func (s *Store) Close() error {
	s.stmts.close()
	return errors.Join(s.db.Close(), s.watch.close(), s.locks.close())
}
