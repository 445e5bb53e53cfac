// Package postgres is a [store.Store] in PostgreSQL, through
// github.com/jackc/pgx/v5 (pgxpool).
//
// Saves are compare-and-swap updates (UPDATE … WHERE revision = $n, or
// INSERT … ON CONFLICT DO NOTHING to create), in one transaction with the
// history append and the suspension index rewrite, so any number of processes
// may share the database. [Store.ClaimExpired] is one UPDATE over a
// SELECT … FOR UPDATE SKIP LOCKED: concurrent sweepers on several hosts skip
// each other's rows and never receive the same suspension within a lease.
//
// The tables live in their own schema (Config.Schema, default "markov"),
// created and upgraded by [Open] with ordered migrations recorded in
// schema_migrations, under an advisory lock so that processes starting
// together migrate once:
//
//	CREATE TABLE machines (
//	    id          text PRIMARY KEY,
//	    revision    bigint NOT NULL,
//	    tree        bytea NOT NULL,
//	    history_len bigint NOT NULL,
//	    updated_at  timestamptz NOT NULL
//	);
//	CREATE TABLE history (
//	    machine_id text NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
//	    seq        bigint NOT NULL,                 -- 0, 1, 2, ... per machine
//	    data       bytea NOT NULL,
//	    PRIMARY KEY (machine_id, seq)
//	);
//	CREATE TABLE suspensions (
//	    id            text PRIMARY KEY,
//	    machine_id    text NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
//	    status        text NOT NULL                 -- pending, resolved, expired, cancelled
//	                  CHECK (status IN ('pending', 'resolved', 'expired', 'cancelled')),
//	    kind          text NOT NULL,
//	    name          text NOT NULL,
//	    reason        text NOT NULL,
//	    deadline      timestamptz,                  -- NULL: none
//	    created_at    timestamptz,                  -- NULL: zero time
//	    claimed_until timestamptz,                  -- NULL: never claimed
//	    remind_at     timestamptz                   -- the next reminder; NULL: none
//	);
//	CREATE INDEX suspensions_machine_idx ON suspensions (machine_id);
//	CREATE INDEX suspensions_status_deadline_idx ON suspensions (status, deadline);
//	CREATE TABLE replays (                          -- store.ReplayGuard
//	    key        text PRIMARY KEY,
//	    expires_at timestamptz NOT NULL
//	);
//	CREATE INDEX replays_expires_at_idx ON replays (expires_at);
//	ALTER TABLE suspensions ADD COLUMN event text NOT NULL DEFAULT '';
//	CREATE INDEX suspensions_event_idx ON suspensions (event, status) WHERE event <> '';
//	CREATE TABLE suspend_requests (                 -- store.SuspendRequester
//	    id         text PRIMARY KEY,
//	    machine_id text NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
//	    body       bytea NOT NULL,
//	    created_at timestamptz NOT NULL DEFAULT now()
//	);
//	CREATE INDEX suspend_requests_machine_idx ON suspend_requests (machine_id, created_at);
//	CREATE TABLE events (                           -- store.EventLog: the event log
//	    machine_id text NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
//	    seq        bigint NOT NULL,                 -- 1, 2, 3, ... per machine ID, after its floor
//	    data       bytea NOT NULL,
//	    at         timestamptz NOT NULL,
//	    PRIMARY KEY (machine_id, seq)
//	);
//	CREATE TABLE suspension_feed (                  -- store.EventLog: the suspension feed
//	    cursor     bigint PRIMARY KEY,              -- from feed_cursor, in commit order
//	    suspend_id text NOT NULL,
//	    machine_id text NOT NULL,
//	    status     text NOT NULL,
//	    kind       text NOT NULL,
//	    name       text NOT NULL,
//	    reason     text NOT NULL,
//	    deadline   timestamptz,
//	    created_at timestamptz,
//	    at         timestamptz NOT NULL
//	);
//	CREATE INDEX suspension_feed_machine_idx ON suspension_feed (machine_id);
//	CREATE TABLE feed_cursor (one boolean PRIMARY KEY CHECK (one), last bigint NOT NULL);
//	ALTER TABLE machines ADD COLUMN incarnation bigint NOT NULL DEFAULT 0; -- store.TailLoader
//	CREATE TABLE history_blocks (                   -- the history's first entries, 128 a row
//	    machine_id text NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
//	    seq        bigint NOT NULL,                 -- its first entry's: 0, 128, 256, ... per machine
//	    data       bytea NOT NULL,                  -- each entry after its length, a uvarint
//	    PRIMARY KEY (machine_id, seq)
//	);
//	ALTER TABLE machines ADD COLUMN packed bigint NOT NULL DEFAULT 0; -- entries in history_blocks
//	CREATE TABLE event_floors (                     -- store.EventLog: the floor of each machine ID deleted with events
//	    machine_id text PRIMARY KEY,
//	    seq        bigint NOT NULL                  -- the last seq of its deleted logs
//	);
//	ALTER TABLE replays ADD COLUMN outcome bytea;   -- store.OutcomeKeeper
//	ALTER TABLE suspension_feed ADD COLUMN machine bytea; -- store.MachineChange, JSON; NULL: a suspension change
//	CREATE TABLE parked (                           -- store.Parker: machines the sweeper could not run
//	    machine_id text PRIMARY KEY REFERENCES machines (id) ON DELETE CASCADE,
//	    revision   bigint NOT NULL,                 -- the machine's when parked; a save since unparks it
//	    errors     text[] NOT NULL,                 -- oldest first
//	    at         timestamptz NOT NULL
//	);
//
// Watchers ([Store.Subscribe]) LISTEN on a dedicated connection each: a
// save NOTIFYs, in its transaction, the channel of its machine when it
// logs events and the feed's channel when it changes suspensions, and
// [Store.Publish] sends live payloads as NOTIFY payloads. Channels are
// named from a hash of the schema and the machine ID, so stores in other
// schemas of the database do not wake each other. A watcher holds an
// advisory lock of its channel shared while it listens, and nothing is
// sent on a channel whose lock nobody holds: a NOTIFY queues every
// notifying transaction of the database behind it until it commits, so
// notices that nobody hears would make the saves of all machines commit
// one at a time.
//
// A save costs a constant number of round trips (the history append is one
// INSERT over unnest) and does not grow with the history. Once a machine's
// history rows reach 128 entries, the save packs them into history_blocks
// rows of 128 instead, in the same number of statements: the machine's
// update returns the rows to pack, and one statement writes the blocks,
// deletes those rows, inserts the rest and records the entries packed. A
// load, one statement, reads a row per 128 entries and fewer than 128
// single rows: decoding one array element per entry made a load of a long
// history several times slower. IDs are ordered bytewise (COLLATE "C"),
// like the other stores.
//
// Event sequence numbers never repeat for a machine ID ([store.EventLog]):
// a delete records the last one of the machine's log in event_floors,
// and a save that logs events into an empty log goes on from the ID's
// floor there. A save to a log that has entries reads nothing more than
// before.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// Config configures [Open].
type Config struct {
	// ConnString is a PostgreSQL URL or keyword/value string, as pgxpool
	// accepts it. Required unless Pool is set.
	ConnString string
	// Pool, if set, is used instead of opening a pool from ConnString. The
	// store does not close it.
	Pool *pgxpool.Pool
	// Schema is the schema holding the store's tables, created if missing.
	// Empty means "markov".
	Schema string
	// Now is the clock used for Snapshot.UpdatedAt; nil means time.Now.
	Now func() time.Time
	// LockConns caps the machines this store holds locked at once
	// ([Store.LockMachine]); zero means DefaultLockConns.
	LockConns int
}

// Store is a [store.Store] in PostgreSQL. Its methods are safe for
// concurrent use, and any number of processes may share the database.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	now      func() time.Time
	q        queries
	schema   string
	// lockConns and locks serve LockMachine (lock.go).
	lockConns int
	locks     lockPool
	// river checks River's migrations in Ping (river.go).
	river *rivermigrate.Migrator[pgx.Tx]
}

// Store implements the core interface and every optional capability.
var _ backend.Database = (*Store)(nil)

// Open connects (unless cfg.Pool is set) and brings the schema up to date.
// A schema migrated by a newer version of this package is refused.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	schema := cfg.Schema
	if schema == "" {
		schema = "markov"
	}
	s := &Store{pool: cfg.Pool, now: cfg.Now, q: newQueries(schema), schema: schema, lockConns: cmp.Or(cfg.LockConns, DefaultLockConns)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.pool == nil {
		if cfg.ConnString == "" {
			return nil, errors.New("postgres: open: neither ConnString nor Pool is set")
		}
		pool, err := pgxpool.New(ctx, cfg.ConnString)
		if err != nil {
			return nil, fmt.Errorf("postgres: open: %w", err)
		}
		s.pool, s.ownsPool = pool, true
	}
	err := s.migrate(ctx, schema)
	if err == nil {
		err = s.migrateRiver(ctx, schema)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres: open schema %q: %w", schema, err)
	}
	return s, nil
}

// migrations are applied in order; migration i is recorded as version i+1.
// {s} stands for the quoted schema name. Never edit one that has shipped:
// append a new one.
var migrations = [...]string{
	`CREATE TABLE {s}.machines (
		id          text PRIMARY KEY,
		revision    bigint NOT NULL,
		tree        bytea NOT NULL,
		history_len bigint NOT NULL,
		updated_at  timestamptz NOT NULL
	);
	CREATE TABLE {s}.history (
		machine_id text NOT NULL REFERENCES {s}.machines (id) ON DELETE CASCADE,
		seq        bigint NOT NULL,
		data       bytea NOT NULL,
		PRIMARY KEY (machine_id, seq)
	);
	CREATE TABLE {s}.suspensions (
		id            text PRIMARY KEY,
		machine_id    text NOT NULL REFERENCES {s}.machines (id) ON DELETE CASCADE,
		status        text NOT NULL,
		kind          text NOT NULL,
		name          text NOT NULL,
		reason        text NOT NULL,
		deadline      timestamptz,
		created_at    timestamptz,
		claimed_until timestamptz
	);
	CREATE INDEX suspensions_machine_idx ON {s}.suspensions (machine_id);
	CREATE INDEX suspensions_status_deadline_idx ON {s}.suspensions (status, deadline);`,
	// 2: statuses are store.Statuses. Schemas written before kept
	// free-form statuses; those that are none of the four left pending, and
	// the index said "resolved" for every way out of pending.
	`UPDATE {s}.suspensions SET status = 'resolved'
		WHERE status NOT IN ('pending', 'resolved', 'expired', 'cancelled');
	ALTER TABLE {s}.suspensions ADD CONSTRAINT suspensions_status_check
		CHECK (status IN ('pending', 'resolved', 'expired', 'cancelled'));`,
	// 3: the inbox of a fleet (package durable/fleet): inputs accepted for a
	// machine, committed with the River job that applies them. At most one
	// accepted result per suspension; consumed_rev is the revision whose
	// save applies the input.
	`CREATE TABLE {s}.inbox (
		id           bigserial PRIMARY KEY,
		machine_id   text NOT NULL,
		suspend_id   text UNIQUE,
		kind         text NOT NULL,
		body         bytea NOT NULL,
		consumed_rev bigint,
		accepted_at  timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX inbox_machine_idx ON {s}.inbox (machine_id, id);`,
	// 4: the replay guard's records.
	`CREATE TABLE {s}.replays (
		key        text PRIMARY KEY,
		expires_at timestamptz NOT NULL
	);
	CREATE INDEX replays_expires_at_idx ON {s}.replays (expires_at);`,
	// 5: the event a suspension waits for (store.Suspension.Event), and
	// caller suspend requests (store.SuspendRequester).
	`ALTER TABLE {s}.suspensions ADD COLUMN event text NOT NULL DEFAULT '';
	CREATE INDEX suspensions_event_idx ON {s}.suspensions (event, status) WHERE event <> '';
	CREATE TABLE {s}.suspend_requests (
		id         text PRIMARY KEY,
		machine_id text NOT NULL REFERENCES {s}.machines (id) ON DELETE CASCADE,
		body       bytea NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX suspend_requests_machine_idx ON {s}.suspend_requests (machine_id, created_at);`,
	// 6: the event log and the suspension feed (store.EventLog). The
	// feed's cursors come from the one row of feed_cursor, which a save
	// holds locked until it commits: cursors are given in commit order.
	`CREATE TABLE {s}.events (
		machine_id text NOT NULL REFERENCES {s}.machines (id) ON DELETE CASCADE,
		seq        bigint NOT NULL,
		data       bytea NOT NULL,
		at         timestamptz NOT NULL,
		PRIMARY KEY (machine_id, seq)
	);
	CREATE TABLE {s}.suspension_feed (
		cursor     bigint PRIMARY KEY,
		suspend_id text NOT NULL,
		machine_id text NOT NULL,
		status     text NOT NULL,
		kind       text NOT NULL,
		name       text NOT NULL,
		reason     text NOT NULL,
		deadline   timestamptz,
		created_at timestamptz,
		at         timestamptz NOT NULL
	);
	CREATE INDEX suspension_feed_machine_idx ON {s}.suspension_feed (machine_id);
	CREATE TABLE {s}.feed_cursor (one boolean PRIMARY KEY CHECK (one), last bigint NOT NULL);
	INSERT INTO {s}.feed_cursor VALUES (true, 0);`,
	// 7: the machine's incarnation (store.Snapshot.Incarnation); machines
	// created before keep 0, which no create gives.
	`ALTER TABLE {s}.machines ADD COLUMN incarnation bigint NOT NULL DEFAULT 0;`,
	// 8: the history's first entries, packed 128 to a row
	// (backend.PackBlock); machines.packed counts them. Machines saved
	// before keep their history rows until a save packs them.
	`CREATE TABLE {s}.history_blocks (
		machine_id text NOT NULL REFERENCES {s}.machines (id) ON DELETE CASCADE,
		seq        bigint NOT NULL,
		data       bytea NOT NULL,
		PRIMARY KEY (machine_id, seq)
	);
	ALTER TABLE {s}.machines ADD COLUMN packed bigint NOT NULL DEFAULT 0;`,
	// 9: the floors of the event log's sequence numbers (store.EventLog):
	// the last sequence number of the logs deleted with the machines of
	// an ID. IDs deleted before keep none: their logs are gone.
	`CREATE TABLE {s}.event_floors (
		machine_id text PRIMARY KEY,
		seq        bigint NOT NULL
	);`,
	// 10: the outcome kept with a replay record (store.OutcomeKeeper).
	`ALTER TABLE {s}.replays ADD COLUMN outcome bytea;`,
	// 11: the effect journal (store.EffectJournal).
	`CREATE TABLE {s}.effects (
		key        text PRIMARY KEY,
		machine_id text NOT NULL,
		name       text NOT NULL,
		digest     text NOT NULL,
		status     text NOT NULL,
		result     bytea,
		started_at timestamptz NOT NULL,
		ended_at   timestamptz
	);
	CREATE INDEX effects_machine_idx ON {s}.effects (machine_id);`,
	// 12: the records of protocol packages (store.RecordKeeper).
	`CREATE TABLE {s}.records (
		kind       text NOT NULL,
		key        text NOT NULL,
		data       bytea NOT NULL,
		version    bigint NOT NULL,
		updated_at timestamptz NOT NULL,
		PRIMARY KEY (kind, key)
	);`,
	// 13: the audit log (store.AuditLog), hash-chained, and its head: an
	// append moves the head (its row lock orders appends) and inserts
	// the entry in one statement.
	`CREATE TABLE {s}.audit_log (
		seq        bigint PRIMARY KEY,
		machine_id text NOT NULL,
		entry      bytea NOT NULL,
		prev       bytea NOT NULL,
		hash       bytea NOT NULL,
		sig        bytea NOT NULL
	);
	CREATE TABLE {s}.audit_head (
		id   int PRIMARY KEY CHECK (id = 1),
		seq  bigint NOT NULL,
		prev bytea NOT NULL,
		hash bytea NOT NULL
	);
	INSERT INTO {s}.audit_head VALUES (1, 0, '', '');`,
	// 14: the uses of standing approval rules (store.RuleUses): one row
	// per use, and a count per rule whose row lock orders the uses.
	`CREATE TABLE {s}.rule_uses (
		rule       text NOT NULL,
		suspend_id text NOT NULL,
		machine_id text NOT NULL,
		PRIMARY KEY (rule, suspend_id)
	);
	CREATE TABLE {s}.rule_counts (
		rule text PRIMARY KEY,
		used bigint NOT NULL
	);`,
	// 15: a fleet's inbox holds one result per suspension and decider:
	// the approvers of a governed suspension's quorum (the decider, the
	// approver a decision counts for) each have theirs accepted, while
	// any other result (decider '') stays one per suspension.
	`ALTER TABLE {s}.inbox ADD COLUMN decider text NOT NULL DEFAULT '';
	ALTER TABLE {s}.inbox DROP CONSTRAINT inbox_suspend_id_key;
	CREATE UNIQUE INDEX inbox_suspend_decider_idx ON {s}.inbox (suspend_id, decider);`,
	// 16: a suspension's next reminder (store.Suspension.RemindAt),
	// which ClaimExpired hands out as it does a deadline.
	`ALTER TABLE {s}.suspensions ADD COLUMN remind_at timestamptz;
	CREATE INDEX suspensions_status_remind_idx ON {s}.suspensions (status, remind_at);`,
	// 17: machine changes in the suspension feed (store.MachineChange;
	// NULL for a suspension change), and the machines a sweeper could not
	// run (store.Parker).
	`ALTER TABLE {s}.suspension_feed ADD COLUMN machine bytea;
	CREATE TABLE {s}.parked (
		machine_id text PRIMARY KEY REFERENCES {s}.machines (id) ON DELETE CASCADE,
		revision   bigint NOT NULL,
		errors     text[] NOT NULL,
		at         timestamptz NOT NULL
	);`,
}

// SchemaVersion is the schema version this package writes: the number of
// migrations, the highest version in schema_migrations.
const SchemaVersion = len(migrations)

func (s *Store) migrate(ctx context.Context, schema string) error {
	h := fnv.New64a()
	h.Write([]byte("markov/store/postgres:" + schema))
	lockKey := int64(h.Sum64())
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q.expand(`CREATE SCHEMA IF NOT EXISTS {s};
			CREATE TABLE IF NOT EXISTS {s}.schema_migrations (
				version    integer PRIMARY KEY,
				applied_at timestamptz NOT NULL DEFAULT now()
			)`)); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, s.q.expand(`SELECT coalesce(max(version), 0) FROM {s}.schema_migrations`)).Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if v > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this package's %d", v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.Exec(ctx, s.q.expand(migrations[i])); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			if _, err := tx.Exec(ctx, s.q.expand(`INSERT INTO {s}.schema_migrations (version) VALUES ($1)`), i+1); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		return nil
	})
}

// queries holds the SQL with the schema filled in.
type queries struct {
	schema                                                   *strings.Replacer
	load, create, update, appendHistory, pack                string
	deleteSuspensions, insertSuspensions                     string
	deleteMachine, listMachines, findSuspension              string
	listSuspensions, claimExpired, remember                  string
	keepOutcome, outcome                                     string
	forget, beginEffect, endEffect, endEffects, forgetEffect string
	addRequest, requests, dropRequest                        string
	lockMachine, appendEvents                                string
	appendAudit, readAudit, auditHead                        string
	addRuleUse, countRuleUse, dropRuleUse, uncountRuleUse    string
	ruleUsed                                                 string
}

// blockLen is [backend.BlockLen] in SQL.
var blockLen = strconv.Itoa(backend.BlockLen)

const suspensionColumns = `id, machine_id, status, kind, name, reason, deadline, created_at, claimed_until, event, remind_at`

// suspensionOrder is store.CompareSuspensions in SQL.
const suspensionOrder = ` ORDER BY deadline ASC NULLS LAST, created_at ASC NULLS FIRST, id COLLATE "C"`

func newQueries(schema string) queries {
	q := queries{schema: strings.NewReplacer("{s}", pgx.Identifier{schema}.Sanitize())}
	// The blocks from the one holding entry $2 on, and the rows from $2
	// on, after the blocks.
	q.load = q.expand(`SELECT m.revision, m.tree, m.updated_at, m.incarnation, m.history_len, m.packed,
		(SELECT array_agg(b.data ORDER BY b.seq) FROM {s}.history_blocks b
			WHERE b.machine_id = m.id AND b.seq >= $2::bigint / ` + blockLen + ` * ` + blockLen + ` AND b.seq < m.packed),
		(SELECT array_agg(h.data ORDER BY h.seq) FROM {s}.history h
			WHERE h.machine_id = m.id AND h.seq >= greatest($2::bigint, m.packed) AND h.seq < m.history_len),
		EXISTS (SELECT 1 FROM {s}.suspend_requests r WHERE r.machine_id = m.id),
		` + lastSeq(`m.id`) + `
		FROM {s}.machines m WHERE m.id = $1`)
	q.create = q.expand(`INSERT INTO {s}.machines (id, revision, tree, history_len, updated_at, incarnation)
		VALUES ($1, 1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`)
	// The update returns the history's length before the save, its
	// entries in blocks and, when the save packs (the rows and the
	// entries appended reach a block), the rows that go into blocks: all
	// of them but, in a database written before blocks, those past the
	// last whole block. It sees the rows of the revision it updates: a
	// save that changed them since its snapshot also changed the revision.
	q.update = q.expand(`UPDATE {s}.machines AS m
		SET revision = m.revision + 1, tree = $3, history_len = m.history_len + $4, updated_at = $5
		WHERE m.id = $1 AND m.revision = $2
		RETURNING m.history_len - $4, m.packed, EXISTS (SELECT 1 FROM {s}.suspend_requests r WHERE r.machine_id = $1),
			CASE WHEN m.history_len - m.packed >= ` + blockLen + ` THEN
				(SELECT array_agg(h.data ORDER BY h.seq) FROM {s}.history h
					WHERE h.machine_id = $1 AND h.seq >= m.packed AND h.seq < m.history_len / ` + blockLen + ` * ` + blockLen + `)
			END`)
	q.appendHistory = q.expand(`INSERT INTO {s}.history (machine_id, seq, data)
		SELECT $1, $2 + t.ord - 1, t.data FROM unnest($3::bytea[]) WITH ORDINALITY AS t (data, ord)`)
	// pack writes the blocks $5 from entry $2 on, deletes the rows below
	// $3 (those in the blocks), records $2 + len($5) * blockLen entries
	// packed and appends the rows $6 from entry $4 on.
	q.pack = q.expand(`WITH b AS (
			INSERT INTO {s}.history_blocks (machine_id, seq, data)
			SELECT $1, $2::bigint + (t.ord - 1) * ` + blockLen + `, t.data FROM unnest($5::bytea[]) WITH ORDINALITY AS t (data, ord)
		), d AS (
			DELETE FROM {s}.history WHERE machine_id = $1 AND seq >= $2 AND seq < $3
		), m AS (
			UPDATE {s}.machines SET packed = $2::bigint + cardinality($5::bytea[]) * ` + blockLen + ` WHERE id = $1
		)
		INSERT INTO {s}.history (machine_id, seq, data)
		SELECT $1, $4::bigint + t.ord - 1, t.data FROM unnest($6::bytea[]) WITH ORDINALITY AS t (data, ord)`)
	q.deleteSuspensions = q.expand(`DELETE FROM {s}.suspensions WHERE machine_id = $1 RETURNING id, status, claimed_until`)
	q.insertSuspensions = q.expand(`INSERT INTO {s}.suspensions (` + suspensionColumns + `)
		SELECT t.id, $1, t.status, t.kind, t.name, t.reason, t.deadline, t.created_at, t.claimed_until, t.event, t.remind_at
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::timestamptz[], $8::timestamptz[], $9::timestamptz[], $10::text[], $11::timestamptz[])
			AS t (id, status, kind, name, reason, deadline, created_at, claimed_until, event, remind_at)
		ON CONFLICT (id) DO NOTHING
		RETURNING id`)
	// The delete makes the log's last sequence number the ID's floor
	// (store.EventLog); its snapshot must hold every event logged, so it
	// runs after lockMachine, in the same transaction (Delete).
	q.lockMachine = q.expand(`SELECT FROM {s}.machines WHERE id = $1 FOR UPDATE`)
	q.deleteMachine = q.expand(`WITH f AS (DELETE FROM {s}.suspension_feed WHERE machine_id = $1),
		e AS (DELETE FROM {s}.effects WHERE machine_id = $1),
		l AS (INSERT INTO {s}.event_floors AS fl (machine_id, seq)
			SELECT $1, max(seq) FROM {s}.events WHERE machine_id = $1 HAVING count(*) > 0
			ON CONFLICT (machine_id) DO UPDATE SET seq = greatest(fl.seq, EXCLUDED.seq))
		DELETE FROM {s}.machines WHERE id = $1`)
	q.appendEvents = q.expand(`INSERT INTO {s}.events (machine_id, seq, data, at)
		SELECT $1, ` + lastSeq(`$1`) + ` + t.ord, t.data, $3
		FROM unnest($2::bytea[]) WITH ORDINALITY AS t (data, ord)`)
	q.listMachines = q.expand(`SELECT id FROM {s}.machines ORDER BY id COLLATE "C"`)
	q.findSuspension = q.expand(`SELECT ` + suspensionColumns + ` FROM {s}.suspensions WHERE id = $1`)
	q.listSuspensions = q.expand(`SELECT ` + suspensionColumns + ` FROM {s}.suspensions
		WHERE ($1::text IS NULL OR machine_id = $1)
		  AND ($2::text IS NULL OR status = $2)
		  AND ($3::timestamptz IS NULL OR deadline < $3)
		  AND ($5::text IS NULL OR event = $5)` +
		suspensionOrder + ` LIMIT $4`)
	q.claimExpired = q.expand(`WITH c AS (
			SELECT id FROM {s}.suspensions
			WHERE status = $1 AND (deadline <= $2 OR remind_at <= $2) AND (claimed_until IS NULL OR claimed_until <= $2)` +
		suspensionOrder + `
			LIMIT $4
			FOR UPDATE SKIP LOCKED
		)
		UPDATE {s}.suspensions AS s SET claimed_until = $3 FROM c WHERE s.id = c.id
		RETURNING s.id, s.machine_id, s.status, s.kind, s.name, s.reason, s.deadline, s.created_at, s.claimed_until, s.event, s.remind_at`)
	q.addRequest = q.expand(`INSERT INTO {s}.suspend_requests (id, machine_id, body)
		SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM {s}.machines WHERE id = $2)
		ON CONFLICT (id) DO NOTHING RETURNING true`)
	q.requests = q.expand(`SELECT id, body, created_at FROM {s}.suspend_requests WHERE machine_id = $1 ORDER BY created_at, id COLLATE "C"`)
	q.dropRequest = q.expand(`DELETE FROM {s}.suspend_requests WHERE machine_id = $1 AND id = $2`)
	// The expired records are deleted a batch at a time, skipping rows
	// another call is deleting. The insert does not see this statement's
	// deletes, so a conflicting record that has expired is taken over.
	q.forget = q.expand(`DELETE FROM {s}.replays WHERE key = $1`)
	// The insert's snapshot may miss a row another transaction committed
	// while the insert waited on it: then it returns nothing, and
	// BeginEffect asks again.
	q.beginEffect = q.expand(`WITH ins AS (
			INSERT INTO {s}.effects (key, machine_id, name, digest, status, started_at)
			VALUES ($1, $2, $3, $4, 'started', now())
			ON CONFLICT (key) DO NOTHING
			RETURNING machine_id, name, digest, status, result, started_at, ended_at)
		SELECT *, true FROM ins
		UNION ALL
		SELECT machine_id, name, digest, status, result, started_at, ended_at, false FROM {s}.effects
		WHERE key = $1 AND NOT EXISTS (SELECT FROM ins)`)
	q.endEffect = q.expand(`UPDATE {s}.effects SET status = $2, result = $3, ended_at = now() WHERE key = $1 AND status = 'started'`)
	q.endEffects = q.expand(`UPDATE {s}.effects e SET status = u.status, result = u.result, ended_at = now()
		FROM unnest($1::text[], $2::text[], $3::bytea[]) AS u(key, status, result)
		WHERE e.key = u.key AND e.status = 'started'`)
	q.forgetEffect = q.expand(`DELETE FROM {s}.effects WHERE key = $1`)
	q.remember = q.expand(`WITH gone AS (
			DELETE FROM {s}.replays WHERE key IN (
				SELECT key FROM {s}.replays WHERE expires_at <= now()
				LIMIT 100 FOR UPDATE SKIP LOCKED)
		)
		INSERT INTO {s}.replays AS r (key, expires_at) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at, outcome = NULL WHERE r.expires_at <= now()
		RETURNING true`)
	q.keepOutcome = q.expand(`UPDATE {s}.replays SET outcome = $2 WHERE key = $1 AND expires_at > now()`)
	q.outcome = q.expand(`SELECT outcome FROM {s}.replays WHERE key = $1 AND expires_at > now()`)
	q.appendAudit = q.expand(appendAuditSQL)
	q.readAudit = q.expand(`SELECT seq, machine_id, entry, prev, hash, sig FROM {s}.audit_log WHERE seq > $1 ORDER BY seq`)
	q.auditHead = q.expand(`SELECT seq, hash FROM {s}.audit_head WHERE id = 1`)
	q.addRuleUse = q.expand(`INSERT INTO {s}.rule_uses (rule, suspend_id, machine_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`)
	q.countRuleUse = q.expand(`INSERT INTO {s}.rule_counts AS c (rule, used) VALUES ($1, 1)
		ON CONFLICT (rule) DO UPDATE SET used = c.used + 1 WHERE $2 <= 0 OR c.used < $2 RETURNING used`)
	q.dropRuleUse = q.expand(`DELETE FROM {s}.rule_uses WHERE rule = $1 AND suspend_id = $2`)
	q.uncountRuleUse = q.expand(`UPDATE {s}.rule_counts SET used = used - 1 WHERE rule = $1`)
	q.ruleUsed = q.expand(`SELECT coalesce((SELECT used FROM {s}.rule_counts WHERE rule = $1), 0)`)
	return q
}

func (q queries) expand(sql string) string { return q.schema.Replace(sql) }

// lastSeq is, in SQL, the last sequence number of the event log of the
// machine ID id: the ID's floor when the log is empty, 0 without one. The
// floor is read only then (COALESCE evaluates no more arguments than it
// needs).
func lastSeq(id string) string {
	return `coalesce((SELECT max(e.seq) FROM {s}.events e WHERE e.machine_id = ` + id + `),
		(SELECT f.seq FROM {s}.event_floors f WHERE f.machine_id = ` + id + `), 0)`
}

// ts encodes a time, NULL for the zero time.
func ts(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

func fromTS(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// Load implements [store.Store].
func (s *Store) Load(ctx context.Context, machineID string) (*store.Snapshot, error) {
	return s.LoadTail(ctx, machineID, 0)
}

// LoadTail implements [store.TailLoader] in one statement, which reads
// the last sequence number of the machine's event log
// (Snapshot.EventSeq) in the same snapshot.
func (s *Store) LoadTail(ctx context.Context, machineID string, from int) (*store.Snapshot, error) {
	l := loaded{snap: &store.Snapshot{MachineID: machineID}}
	err := store.CheckID(machineID)
	if err == nil && from < 0 {
		err = fmt.Errorf("%w: history from %d", store.ErrInvalid, from)
	}
	if err == nil {
		err = s.pool.QueryRow(ctx, s.q.load, machineID, from).Scan(&l)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	snap := l.snap
	if err == nil {
		snap.HistoryFrom = int(min(l.length, int64(from)))
		snap.History, err = backend.Unpack(int64(snap.HistoryFrom), l.length, l.packed, l.blocks, l.rows)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: load machine %q: %w", machineID, err)
	}
	snap.Tree = backend.NonNil(snap.Tree)
	snap.UpdatedAt = l.updated.UTC()
	return snap, nil
}

// loaded is the row of the load query.
type loaded struct {
	snap           *store.Snapshot
	updated        time.Time
	length, packed int64    // the history's length, its entries in blocks
	blocks, rows   [][]byte // the history's blocks and rows from the one holding the first entry loaded
}

// ScanRow implements [pgx.RowScanner].
func (l *loaded) ScanRow(rows pgx.Rows) error {
	snap := l.snap
	if err := rows.Scan(&snap.Revision, &snap.Tree, &l.updated, &snap.Incarnation, &l.length, &l.packed, nil, nil, &snap.SuspendRequests, &snap.EventSeq); err != nil {
		return err
	}
	if err := scanArray(rows, 6, &l.blocks); err != nil {
		return err
	}
	return scanArray(rows, 7, &l.rows)
}

// updated is the row of the update query.
type updated struct {
	base, packed int64    // the history's length before the save, its entries in blocks
	requests     bool     // the machine has suspend requests
	stored       [][]byte // when the save packs, the rows that go into blocks
}

// ScanRow implements [pgx.RowScanner].
func (u *updated) ScanRow(rows pgx.Rows) error {
	if err := rows.Scan(&u.base, &u.packed, &u.requests, nil); err != nil {
		return err
	}
	return scanArray(rows, 3, &u.stored)
}

// scanArray decodes column i of the current row, a bytea[], into dst,
// which it leaves nil if the column is NULL. (Rows.Scan builds a scan
// plan for an array column even when it is NULL, several allocations a
// statement, and the arrays of loads and saves are often NULL.)
func scanArray(rows pgx.Rows, i int, dst *[][]byte) error {
	raw := rows.RawValues()[i]
	if raw == nil {
		return nil
	}
	fd := rows.FieldDescriptions()[i]
	return rows.TypeMap().Scan(fd.DataTypeOID, fd.Format, raw, dst)
}

// Save implements [store.Store].
func (s *Store) Save(ctx context.Context, sv store.Save) (int64, error) {
	rev, _, err := s.SaveReporting(ctx, sv)
	return rev, err
}

// SaveReporting implements [store.RequestReporter]. A machine created by
// the save has no requests.
func (s *Store) SaveReporting(ctx context.Context, sv store.Save) (revision int64, requests bool, err error) {
	if err := sv.Validate(); err != nil {
		return 0, false, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now()
		var u updated
		if sv.Revision == 0 {
			tag, err := tx.Exec(ctx, s.q.create, sv.MachineID, backend.NonNil(sv.Tree), len(sv.Append), now, store.NewIncarnation())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("machine exists: %w", store.ErrConflict)
			}
		} else {
			err := tx.QueryRow(ctx, s.q.update, sv.MachineID, sv.Revision, backend.NonNil(sv.Tree), len(sv.Append), now).Scan(&u)
			requests = u.requests
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("based on revision %d, which is not the stored one or the machine does not exist: %w", sv.Revision, store.ErrConflict)
			}
			if err != nil {
				return err
			}
		}
		if err := s.appendHistory(ctx, tx, sv.MachineID, u.base, u.packed, u.stored, sv.Append); err != nil {
			return err
		}
		if err := s.appendEvents(ctx, tx, sv.MachineID, sv.Events, now); err != nil {
			return err
		}
		if err := s.appendAudit(ctx, tx, sv.Audit); err != nil {
			return err
		}
		if err := s.replaceSuspensions(ctx, tx, sv); err != nil {
			return err
		}
		if err := s.endEffects(ctx, tx, sv.Effects); err != nil {
			return err
		}
		if sv.Finish == nil {
			return nil
		}
		return s.feedMachine(ctx, tx, sv.MachineID, store.MachineChange{Event: store.MachineFinished, Revision: sv.Revision + 1, Answer: sv.Finish.Answer})
	})
	if err != nil {
		return 0, false, fmt.Errorf("postgres: save machine %q: %w", sv.MachineID, err)
	}
	return sv.Revision + 1, requests, nil
}

// appendHistory appends entries to the machine's history of length
// entries, the first packed of them in blocks. When the rows and entries
// reach a block (backend.Pack), stored holds the rows that go into
// blocks, and one statement writes the whole blocks of them and entries,
// deletes those rows, records the entries packed and inserts the entries
// left over as rows; otherwise one statement inserts entries as rows.
func (s *Store) appendHistory(ctx context.Context, tx pgx.Tx, machineID string, length, packed int64, stored, entries [][]byte) error {
	blocks, left, err := backend.Pack(length, packed, stored, entries)
	if err != nil {
		return err
	}
	rows := make([][]byte, len(left))
	for i, e := range left {
		rows[i] = backend.NonNil(e)
	}
	switch {
	case len(blocks) > 0:
		_, err = tx.Exec(ctx, s.q.pack, machineID, packed, packed+int64(len(stored)), max(length, packed+int64(len(blocks))*backend.BlockLen), blocks, rows)
	case len(rows) > 0:
		_, err = tx.Exec(ctx, s.q.appendHistory, machineID, length, rows)
	}
	return err
}

// replaceSuspensions replaces the machine's index entries, keeping the claim
// lease of suspend IDs that stay.
func (s *Store) replaceSuspensions(ctx context.Context, tx pgx.Tx, sv store.Save) error {
	rows, err := tx.Query(ctx, s.q.deleteSuspensions, sv.MachineID)
	if err != nil {
		return err
	}
	claims := map[string]pgtype.Timestamptz{}
	was := map[string]string{}
	var id, status string
	var until pgtype.Timestamptz
	if _, err := pgx.ForEachRow(rows, []any{&id, &status, &until}, func() error {
		claims[id], was[id] = until, status
		return nil
	}); err != nil {
		return err
	}
	n := len(sv.Suspensions)
	if n == 0 {
		return nil
	}
	if err := s.feedChanges(ctx, tx, sv, was); err != nil {
		return err
	}
	var (
		ids, statuses, kinds, names, reasons = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		events                               = make([]string, n)
		deadlines, created, claimed          = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
		reminds                              = make([]pgtype.Timestamptz, n)
	)
	for i, sp := range sv.Suspensions {
		ids[i], statuses[i], kinds[i], names[i], reasons[i] = sp.ID, string(sp.Status), sp.Kind, sp.Name, sp.Reason
		deadlines[i], created[i], claimed[i] = ts(sp.Deadline), ts(sp.CreatedAt), claims[sp.ID]
		events[i], reminds[i] = sp.Event, ts(sp.RemindAt)
	}
	rows, err = tx.Query(ctx, s.q.insertSuspensions, sv.MachineID, ids, statuses, kinds, names, reasons, deadlines, created, claimed, events, reminds)
	if err != nil {
		return err
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(inserted) < n {
		for _, id := range ids {
			if !slices.Contains(inserted, id) {
				return fmt.Errorf("%w: suspend ID %q belongs to another machine", store.ErrInvalid, id)
			}
		}
	}
	return nil
}

// Delete implements [store.Store].
func (s *Store) Delete(ctx context.Context, machineID string) error {
	if err := store.CheckID(machineID); err != nil {
		return fmt.Errorf("postgres: delete machine %q: %w", machineID, err)
	}
	// One round trip, one implicit transaction: the machine's row is
	// locked first, so that the delete's snapshot, taken after, holds
	// the events of every save that committed before it.
	b := &pgx.Batch{}
	b.Queue(s.q.lockMachine, machineID)
	b.Queue(s.q.deleteMachine, machineID)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	err = errors.Join(err, br.Close())
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: delete machine %q: %w", machineID, err)
	}
	return nil
}

// ListMachines implements [store.MachineLister].
func (s *Store) ListMachines(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.q.listMachines)
	if err != nil {
		return nil, fmt.Errorf("postgres: list machines: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: list machines: %w", err)
	}
	return ids, nil
}

func collectSuspensions(rows pgx.Rows, err error) ([]store.Suspension, error) {
	if err != nil {
		return nil, err
	}
	var out []store.Suspension
	var sp store.Suspension
	var deadline, created, claimed, remind pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&sp.ID, &sp.MachineID, &sp.Status, &sp.Kind, &sp.Name, &sp.Reason, &deadline, &created, &claimed, &sp.Event, &remind}, func() error {
		sp.Deadline, sp.CreatedAt, sp.ClaimedUntil, sp.RemindAt = fromTS(deadline), fromTS(created), fromTS(claimed), fromTS(remind)
		out = append(out, sp)
		return nil
	})
	return out, err
}

// FindSuspension implements [store.Store].
func (s *Store) FindSuspension(ctx context.Context, suspendID string) (store.Suspension, error) {
	if err := store.CheckID(suspendID); err != nil {
		return store.Suspension{}, fmt.Errorf("postgres: find suspension %q: %w", suspendID, err)
	}
	got, err := collectSuspensions(s.pool.Query(ctx, s.q.findSuspension, suspendID))
	if err == nil && len(got) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Suspension{}, fmt.Errorf("postgres: find suspension %q: %w", suspendID, err)
	}
	return got[0], nil
}

// optional returns nil for the zero value, which the queries read as "any".
func optional[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// ListSuspensions implements [store.Store].
func (s *Store) ListSuspensions(ctx context.Context, f store.Filter) ([]store.Suspension, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: list suspensions: %w", err)
	}
	if !f.Selective() {
		return nil, nil
	}
	var before *time.Time
	if !f.DeadlineBefore.IsZero() {
		before = &f.DeadlineBefore
	}
	var limit *int
	if f.Limit > 0 {
		limit = &f.Limit
	}
	got, err := collectSuspensions(s.pool.Query(ctx, s.q.listSuspensions,
		optional(f.MachineID), optional(string(f.Status)), before, limit, optional(f.Event)))
	if err != nil {
		return nil, fmt.Errorf("postgres: list suspensions: %w", err)
	}
	return got, nil
}

// ClaimExpired implements [store.ExpiryClaimer].
func (s *Store) ClaimExpired(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]store.Suspension, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("postgres: claim expired: %w: lease %v is not positive", store.ErrInvalid, lease)
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	got, err := collectSuspensions(s.pool.Query(ctx, s.q.claimExpired, string(store.StatusPending), now, now.Add(lease), lim))
	if err != nil {
		return nil, fmt.Errorf("postgres: claim expired: %w", err)
	}
	slices.SortFunc(got, store.CompareSuspensions)
	return got, nil
}

// Remember implements [store.ReplayGuard], on the database's clock: one
// statement deletes expired records (up to 100 per call) and inserts key,
// or takes over its record if that has expired.
func (s *Store) Remember(ctx context.Context, key string, expiresAt time.Time) (bool, error) {
	if !store.ValidID(key) {
		return false, fmt.Errorf("postgres: remember: %w: the key is not a valid ID", store.ErrInvalid)
	}
	var fresh bool
	err := s.pool.QueryRow(ctx, s.q.remember, key, expiresAt).Scan(&fresh)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("postgres: remember: %w", err)
	}
	return fresh, nil
}

// KeepOutcome implements [store.OutcomeKeeper].
func (s *Store) KeepOutcome(ctx context.Context, key string, outcome []byte) error {
	if !store.ValidID(key) {
		return fmt.Errorf("postgres: keep outcome: %w: the key is not a valid ID", store.ErrInvalid)
	}
	if _, err := s.pool.Exec(ctx, s.q.keepOutcome, key, outcome); err != nil {
		return fmt.Errorf("postgres: keep outcome: %w", err)
	}
	return nil
}

// Outcome implements [store.OutcomeKeeper].
func (s *Store) Outcome(ctx context.Context, key string) ([]byte, error) {
	if !store.ValidID(key) {
		return nil, fmt.Errorf("postgres: outcome: %w: the key is not a valid ID", store.ErrInvalid)
	}
	var out []byte
	err := s.pool.QueryRow(ctx, s.q.outcome, key).Scan(&out)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: outcome: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: outcome: %w", err)
	}
	return out, nil
}

// Forget implements [store.ReplayGuard].
func (s *Store) Forget(ctx context.Context, key string) error {
	if !store.ValidID(key) {
		return fmt.Errorf("postgres: forget: %w: the key is not a valid ID", store.ErrInvalid)
	}
	if _, err := s.pool.Exec(ctx, s.q.forget, key); err != nil {
		return fmt.Errorf("postgres: forget: %w", err)
	}
	return nil
}

// BeginEffect implements [store.EffectJournal].
func (s *Store) BeginEffect(ctx context.Context, e store.Effect) (store.Effect, bool, error) {
	if err := store.CheckEffect(e); err != nil {
		return store.Effect{}, false, fmt.Errorf("postgres: begin effect: %w", err)
	}
	e, created, err := s.beginEffect(ctx, s.pool, e)
	if err != nil {
		return store.Effect{}, false, fmt.Errorf("postgres: begin effect: %w", err)
	}
	return e, created, nil
}

// beginEffect records e as started through db (the pool, or a
// transaction) unless an entry of e.Key exists, and returns the entry
// and whether it created it.
func (s *Store) beginEffect(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, e store.Effect) (store.Effect, bool, error) {
	for range 3 {
		var status string
		var ended *time.Time
		var created bool
		err := db.QueryRow(ctx, s.q.beginEffect, e.Key, e.MachineID, e.Name, e.Digest).
			Scan(&e.MachineID, &e.Name, &e.Digest, &status, &e.Result, &e.StartedAt, &ended, &created)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // another transaction's row, committed after our snapshot
		}
		if err != nil {
			return store.Effect{}, false, err
		}
		e.Status, e.StartedAt = store.EffectStatus(status), e.StartedAt.UTC()
		if ended != nil {
			e.EndedAt = ended.UTC()
		}
		return e, created, nil
	}
	return store.Effect{}, false, fmt.Errorf("%q: %w: the entry changed under every read", e.Key, store.ErrConflict)
}

// RunEffectTx implements [store.TxEffectJournal]: fn's tx is a pgx.Tx
// (read committed). Its entry is inserted first, started, in the
// transaction: another run of the same effect waits on it until this one
// commits (and then finds it done) or rolls back (and then runs).
func (s *Store) RunEffectTx(ctx context.Context, e store.Effect, fn func(ctx context.Context, tx any) ([]byte, error)) (store.Effect, bool, error) {
	if err := store.CheckEffectTx(e); err != nil {
		return store.Effect{}, false, fmt.Errorf("postgres: run effect: %w", err)
	}
	var fnErr error
	ran := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if e.Key != "" {
			stored, created, err := s.beginEffect(ctx, tx, e)
			if err != nil || !created {
				e = stored
				return err
			}
		}
		result, err := fn(ctx, tx)
		if err != nil {
			fnErr = err
			return err
		}
		e.Status, e.Result = store.EffectDone, result
		if e.Key != "" {
			err = tx.QueryRow(ctx, s.q.endEffect+` RETURNING started_at, ended_at`, e.Key, string(store.EffectDone), result).Scan(&e.StartedAt, &e.EndedAt)
			e.StartedAt, e.EndedAt = e.StartedAt.UTC(), e.EndedAt.UTC()
		}
		ran = err == nil
		return err
	})
	switch {
	case fnErr != nil:
		return store.Effect{}, false, fnErr
	case err != nil:
		return store.Effect{}, false, fmt.Errorf("postgres: run effect %q: %w", e.Key, err)
	}
	return e, ran, nil
}

// EndEffect implements [store.EffectJournal].
func (s *Store) EndEffect(ctx context.Context, key string, status store.EffectStatus, result []byte) error {
	if err := store.CheckEffectEnd(key, status); err != nil {
		return fmt.Errorf("postgres: end effect: %w", err)
	}
	tag, err := s.pool.Exec(ctx, s.q.endEffect, key, string(status), result)
	if err == nil && tag.RowsAffected() == 0 {
		err = fmt.Errorf("%w: not started", store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("postgres: end effect %q: %w", key, err)
	}
	return nil
}

// endEffects records the outcomes of a save's effects (Save.Effects) in
// one statement; an effect that is not started is left as it is.
func (s *Store) endEffects(ctx context.Context, tx pgx.Tx, ends []store.EffectEnd) error {
	if len(ends) == 0 {
		return nil
	}
	keys, statuses, results := make([]string, len(ends)), make([]string, len(ends)), make([][]byte, len(ends))
	for i, e := range ends {
		keys[i], statuses[i], results[i] = e.Key, string(e.Status), e.Result
	}
	_, err := tx.Exec(ctx, s.q.endEffects, keys, statuses, results)
	return err
}

// ForgetEffect implements [store.EffectJournal].
func (s *Store) ForgetEffect(ctx context.Context, key string) error {
	if !store.ValidID(key) {
		return fmt.Errorf("postgres: forget effect: %w: effect key %q", store.ErrInvalid, key)
	}
	if _, err := s.pool.Exec(ctx, s.q.forgetEffect, key); err != nil {
		return fmt.Errorf("postgres: forget effect: %w", err)
	}
	return nil
}

// Ping implements [store.Pinger]: it reads the schema version, then
// checks that every River migration this process's River expects is
// applied (both wrap [store.ErrSchemaVersion] when they fail).
func (s *Store) Ping(ctx context.Context) error {
	if err := backend.Ping("postgres", SchemaVersion, s.pool.QueryRow(ctx, s.q.expand(`SELECT coalesce(max(version), 0) FROM {s}.schema_migrations`)).Scan); err != nil {
		return err
	}
	return s.pingRiver(ctx)
}

// Close closes the pool if [Open] opened it.
func (s *Store) Close() error {
	s.locks.close()
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}
