package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/storetest"
)

// open opens a store in a schema of its own.
func open(tb testing.TB) store.Store {
	tb.Helper()
	s, _, _ := pgtest.Open(tb)
	return s
}

func TestConformance(t *testing.T) {
	pgtest.URL(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

func BenchmarkSave(b *testing.B) {
	storetest.BenchmarkSave(b, func(b *testing.B) store.Store { return open(b) })
}

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)

	// Processes starting together migrate once.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.Open(ctx, postgres.Config{ConnString: url, Schema: schema})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open %d: %v", i, err)
		}
	}

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var versions []int
	rows, _ := pool.Query(ctx, "SELECT version FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+" ORDER BY version")
	versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil || len(versions) != postgres.SchemaVersion || versions[len(versions)-1] != postgres.SchemaVersion {
		t.Fatalf("schema_migrations = %v, %v; want 1..%d", versions, err, postgres.SchemaVersion)
	}

	// A caller's pool is used and left open.
	s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, store.Save{MachineID: "m"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("Close closed the caller's pool: %v", err)
	}

	// A newer schema is refused.
	if _, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+" (version) VALUES ($1)", postgres.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	if s, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema}); err == nil {
		s.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := postgres.Open(ctx, postgres.Config{}); err == nil {
		t.Fatal("Open with no connection string succeeded")
	}
	if _, err := postgres.Open(ctx, postgres.Config{ConnString: "not a :// url"}); err == nil {
		t.Fatal("Open with a bad connection string succeeded")
	}
}

// A schema migrated to version 1, whose index may hold statuses that are
// none of store.Statuses, is upgraded on open: its rows keep working, and
// a free-form status that had left pending reads "resolved".
func TestMigrateLegacyStatuses(t *testing.T) {
	ctx := context.Background()
	s, conn, q := upgraded(t,
		// Back to version 1, as an older package left it.
		`ALTER TABLE {s}.suspensions DROP CONSTRAINT suspensions_status_check`,
		`DROP TABLE {s}.inbox`,
		`DELETE FROM {s}.schema_migrations WHERE version > 1`,
		`DROP TABLE {s}.replays`,
		`DROP TABLE {s}.suspend_requests`,
		`ALTER TABLE {s}.suspensions DROP COLUMN event`,
		`DROP TABLE {s}.events`, `DROP TABLE {s}.suspension_feed`, `DROP TABLE {s}.feed_cursor`,
		`ALTER TABLE {s}.machines DROP COLUMN incarnation`,
		`DROP TABLE {s}.history_blocks`, `ALTER TABLE {s}.machines DROP COLUMN packed`,
		`DROP TABLE {s}.event_floors`, `DROP TABLE {s}.effects`, `DROP TABLE {s}.records`, `DROP TABLE {s}.audit_log`, `DROP TABLE {s}.audit_head`, `DROP TABLE {s}.rule_uses`, `DROP TABLE {s}.rule_counts`, `DROP TABLE {s}.parked`,
		`ALTER TABLE {s}.suspensions DROP COLUMN remind_at`,
		`INSERT INTO {s}.machines (id, revision, tree, history_len, updated_at) VALUES ('m', 3, '\x74', 0, now())`,
		`INSERT INTO {s}.suspensions (id, machine_id, status, kind, name, reason, deadline) VALUES
			('old-pending', 'm', 'pending', 'tool', 'ask', 'r', '2000-01-01Z'),
			('old-resolved', 'm', 'resolved', 'tool', 'ask', 'r', NULL),
			('old-partial', 'm', 'expired', 'tool', 'ask', 'r', NULL),
			('old-custom', 'm', 'timed_out', 'tool', 'ask', 'r', NULL)`,
	)
	all, err := s.ListSuspensions(ctx, store.Filter{MachineID: "m"})
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]store.Status{}
	for _, sp := range all {
		statuses[sp.ID] = sp.Status
	}
	if diff := cmp.Diff(map[string]store.Status{
		"old-pending": store.StatusPending, "old-partial": store.StatusExpired,
		"old-resolved": store.StatusResolved, "old-custom": store.StatusResolved,
	}, statuses); diff != "" {
		t.Fatalf("statuses after the upgrade (-want +got):\n%s", diff)
	}
	got, err := s.ClaimExpired(ctx, time.Now(), 0, time.Minute)
	if err != nil || len(got) != 1 || got[0].ID != "old-pending" {
		t.Fatalf("ClaimExpired after the upgrade = %v, %v; want old-pending", got, err)
	}
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Revision: 3}); err != nil {
		t.Fatalf("Save after the upgrade: %v", err)
	}
	// The database itself now refuses other statuses.
	if _, err := conn.Exec(ctx, q(`INSERT INTO {s}.suspensions (id, machine_id, status, kind, name, reason)
		VALUES ('new-custom', 'm', 'timed_out', 'tool', 'ask', 'r')`)); err == nil {
		t.Fatal("the schema accepts a status outside store.Statuses")
	}
}

// A schema migrated to version 7, which keeps a history row per entry, is
// upgraded on open: its machines load the same history, and each packs its
// rows into blocks at its next save, after which it loads the same
// history still, tails included.
func TestMigrateHistoryBlocks(t *testing.T) {
	ctx := context.Background()
	conn, q, url, schema := rawSchema(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, q(sql)); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Back to version 7, as an older package left it: machine m with 300
	// entries and n with 200, a row each; entry 7 of m is empty.
	for _, sql := range []string{
		`ALTER TABLE {s}.replays DROP COLUMN outcome`,
		`DROP TABLE {s}.event_floors`, `DROP TABLE {s}.effects`, `DROP TABLE {s}.records`, `DROP TABLE {s}.audit_log`, `DROP TABLE {s}.audit_head`, `DROP TABLE {s}.rule_uses`, `DROP TABLE {s}.rule_counts`, `DROP TABLE {s}.parked`,
		`ALTER TABLE {s}.suspensions DROP COLUMN remind_at`,
		`ALTER TABLE {s}.inbox DROP COLUMN decider, ADD CONSTRAINT inbox_suspend_id_key UNIQUE (suspend_id)`,
		`ALTER TABLE {s}.suspension_feed DROP COLUMN machine`,
		`DROP TABLE {s}.history_blocks`, `ALTER TABLE {s}.machines DROP COLUMN packed`,
		`DELETE FROM {s}.schema_migrations WHERE version > 7`,
		`INSERT INTO {s}.machines (id, revision, tree, history_len, updated_at, incarnation) VALUES
			('m', 5, '\x74', 300, now(), 42), ('n', 2, '\x74', 200, now(), 43)`,
		`INSERT INTO {s}.history (machine_id, seq, data)
			SELECT 'm', g, CASE WHEN g = 7 THEN '' ELSE convert_to('m' || g, 'UTF8') END FROM generate_series(0, 299) g
			UNION ALL SELECT 'n', g, convert_to('n' || g, 'UTF8') FROM generate_series(0, 199) g`,
	} {
		exec(sql)
	}
	want := map[string][][]byte{}
	for id, n := range map[string]int{"m": 300, "n": 200} {
		for i := range n {
			e := []byte(fmt.Sprintf("%s%d", id, i))
			if id == "m" && i == 7 {
				e = []byte{}
			}
			want[id] = append(want[id], e)
		}
	}

	s, err := postgres.Open(ctx, postgres.Config{ConnString: url, Schema: schema})
	if err != nil {
		t.Fatalf("Open of the old schema: %v", err)
	}
	defer s.Close()
	// layout checks the machine's history rows, blocks and packed count.
	layout := func(id string, rows, blocks, packed int) {
		t.Helper()
		var r, b, p int
		if err := conn.QueryRow(ctx, q(`SELECT (SELECT count(*) FROM {s}.history WHERE machine_id = $1),
			(SELECT count(*) FROM {s}.history_blocks WHERE machine_id = $1),
			(SELECT packed FROM {s}.machines WHERE id = $1)`), id).Scan(&r, &b, &p); err != nil {
			t.Fatal(err)
		}
		if r != rows || b != blocks || p != packed {
			t.Fatalf("machine %s: %d history rows, %d blocks, %d packed; want %d, %d, %d", id, r, b, p, rows, blocks, packed)
		}
	}
	// loads checks Load and LoadTail of the machine against want[id].
	loads := func(id string) {
		t.Helper()
		h := want[id]
		for _, from := range []int{0, 1, 7, 8, 127, 128, 129, 255, 256, 300, len(h) - 1, len(h), len(h) + 5} {
			snap, err := s.LoadTail(ctx, id, from)
			if err != nil {
				t.Fatalf("LoadTail(%s, %d): %v", id, from, err)
			}
			f := min(from, len(h))
			if snap.HistoryFrom != f {
				t.Fatalf("LoadTail(%s, %d).HistoryFrom = %d, want %d", id, from, snap.HistoryFrom, f)
			}
			if diff := cmp.Diff(h[f:], snap.History, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("LoadTail(%s, %d).History (-want +got):\n%s", id, from, diff)
			}
		}
		snap, err := s.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(h, snap.History); diff != "" {
			t.Fatalf("Load(%s).History (-want +got):\n%s", id, diff)
		}
	}
	loads("m")
	loads("n")
	layout("m", 300, 0, 0)
	layout("n", 200, 0, 0)

	rev := map[string]int64{"m": 5, "n": 2}
	save := func(id string, entries ...string) {
		t.Helper()
		sv := store.Save{MachineID: id, Revision: rev[id], Tree: []byte("t")}
		for _, e := range entries {
			sv.Append = append(sv.Append, []byte(e))
			want[id] = append(want[id], []byte(e))
		}
		r, err := s.Save(ctx, sv)
		if err != nil {
			t.Fatalf("Save(%s, revision %d, %d entries): %v", id, rev[id], len(entries), err)
		}
		rev[id] = r
	}
	// A save with nothing to append packs the rows' whole blocks.
	save("n")
	layout("n", 72, 1, 128)
	loads("n")
	// One that appends packs the rows' and entries' whole blocks.
	save("m", "a300")
	layout("m", 45, 2, 256)
	loads("m")
	// A stale save writes nothing.
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Revision: rev["m"] - 1, Append: make([][]byte, 200)}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale Save = %v, want ErrConflict", err)
	}
	layout("m", 45, 2, 256)
	// Then entries a few at a time, and many at once.
	for i := 301; i < 390; i += 3 {
		save("m", fmt.Sprint("a", i), fmt.Sprint("a", i+1), fmt.Sprint("a", i+2))
	}
	layout("m", 391-384, 3, 384)
	loads("m")
	many := make([]string, 300)
	for i := range many {
		many[i] = fmt.Sprint("b", i)
	}
	save("m", many...)
	layout("m", 691-640, 5, 640)
	loads("m")
}

// A schema migrated to version 8, before event floors, is upgraded on
// open: a machine that logged there, deleted after the upgrade and
// created again, logs after the deleted log's last event.
func TestMigrateEventFloors(t *testing.T) {
	s, _, _ := upgraded(t,
		// Back to version 8, as an older package left it.
		`DROP TABLE {s}.effects`, `DROP TABLE {s}.records`, `DROP TABLE {s}.audit_log`, `DROP TABLE {s}.audit_head`, `DROP TABLE {s}.rule_uses`, `DROP TABLE {s}.rule_counts`, `DROP TABLE {s}.parked`,
		`ALTER TABLE {s}.suspensions DROP COLUMN remind_at`,
		`ALTER TABLE {s}.inbox DROP COLUMN decider, ADD CONSTRAINT inbox_suspend_id_key UNIQUE (suspend_id)`,
		`ALTER TABLE {s}.suspension_feed DROP COLUMN machine`,
		`ALTER TABLE {s}.replays DROP COLUMN outcome`,
		`DROP TABLE {s}.event_floors`,
		`DELETE FROM {s}.schema_migrations WHERE version > 8`,
		`INSERT INTO {s}.machines (id, revision, tree, history_len, updated_at, incarnation) VALUES ('m', 1, '\x74', 0, now(), 7)`,
		`INSERT INTO {s}.events (machine_id, seq, data, at) VALUES ('m', 1, '\x61', now()), ('m', 2, '\x62', now())`,
	)
	storetest.CheckLogAcrossDelete(t, s, "m", 2)
}

// The replay guard deletes expired records as it goes, on the database's
// clock.
func TestReplayRecordsCleaned(t *testing.T) {
	ctx := context.Background()
	s, url, schema := pgtest.Open(t)
	defer s.Close()
	for i, at := range []time.Time{time.Now().Add(-time.Hour), time.Now().Add(-time.Minute), time.Now().Add(time.Hour)} {
		if fresh, err := s.Remember(ctx, fmt.Sprintf("k%d", i), at); err != nil || !fresh {
			t.Fatalf("Remember(k%d) = %v, %v", i, fresh, err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, "SELECT key FROM "+pgx.Identifier{schema, "replays"}.Sanitize())
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(keys) != 1 || keys[0] != "k2" {
		t.Fatalf("replays left = %v, %v; want only the live k2", keys, err)
	}
}

func TestPing(t *testing.T) {
	ctx := context.Background()
	s, url, schema := pgtest.Open(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pingRiverMigrations(t, s, pool, schema)
	migrations := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	storetest.Ping(t, s, func(newer bool) {
		q, arg := "DELETE FROM "+migrations+" WHERE version > $1", postgres.SchemaVersion
		if newer {
			q, arg = "INSERT INTO "+migrations+" (version) VALUES ($1)", postgres.SchemaVersion+1
		}
		if _, err := pool.Exec(ctx, q, arg); err != nil {
			t.Fatal(err)
		}
	})
}

// pingRiverMigrations checks that s.Ping fails, wrapping
// store.ErrSchemaVersion, while a River migration this process expects
// is missing from schema (rolled back since Open), and passes again once
// it is back.
func pingRiverMigrations(t *testing.T, s *postgres.Store, pool *pgxpool.Pool, schema string) {
	t.Helper()
	ctx := context.Background()
	table := pgx.Identifier{schema, "river_migration"}.Sanitize()
	var line string
	var version int64
	if err := pool.QueryRow(ctx, "DELETE FROM "+table+" WHERE version = (SELECT max(version) FROM "+table+") RETURNING line, version").Scan(&line, &version); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); !errors.Is(err, store.ErrSchemaVersion) || !strings.Contains(err.Error(), "river") {
		t.Fatalf("Ping with River migration %d missing = %v, want ErrSchemaVersion naming river", version, err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+table+" (line, version) VALUES ($1, $2)", line, version); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping with River's migrations back: %v", err)
	}
}

// upgraded runs sqls on a schema of its own (rawSchema), which take it
// back to what an older package left, and opens a store on it, which
// upgrades it; the store closes when the test ends.
func upgraded(t *testing.T, sqls ...string) (s *postgres.Store, conn *pgx.Conn, q func(string) string) {
	t.Helper()
	ctx := context.Background()
	conn, q, url, schema := rawSchema(t)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, q(sql)); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s, err := postgres.Open(ctx, postgres.Config{ConnString: url, Schema: schema})
	if err != nil {
		t.Fatalf("Open of the old schema: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, conn, q
}

// rawSchema returns a connection to a fresh schema that Open migrated
// (and closed), to take it back to an older version; q names the schema
// where a statement says {s}.
func rawSchema(t *testing.T) (conn *pgx.Conn, q func(string) string, url, schema string) {
	t.Helper()
	s, url, schema := pgtest.Open(t)
	s.Close()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, func(sql string) string { return strings.ReplaceAll(sql, "{s}", pgx.Identifier{schema}.Sanitize()) }, url, schema
}
