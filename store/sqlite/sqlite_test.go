package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/storetest"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "markov.db"))
	})
}

func BenchmarkSave(b *testing.B) {
	storetest.BenchmarkSave(b, func(b *testing.B) store.Store {
		return open(b, filepath.Join(b.TempDir(), "markov.db"))
	})
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "markov.db")
	s := open(t, path)
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Tree: []byte("t"), Append: [][]byte{[]byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	snap, err := s.Load(ctx, "m")
	if err != nil || snap.Revision != 1 || string(snap.Tree) != "t" || len(snap.History) != 1 {
		t.Fatalf("after reopen: %+v, %v", snap, err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	var mode string
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if version != sqlite.SchemaVersion || mode != "wal" {
		t.Fatalf("user_version %d journal_mode %q, want %d wal", version, mode, sqlite.SchemaVersion)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "markov.db")
	open(t, path).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", sqlite.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path}); err == nil {
		s.Close()
		t.Fatal("Open of a database with a newer schema succeeded")
	}
}

func TestOpenConfigErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, cfg := range []sqlite.Config{
		{},
		{Path: filepath.Join(dir, "a?b.db")},
		{Path: filepath.Join(dir, "c.db"), Synchronous: "sometimes"},
	} {
		if s, err := sqlite.Open(ctx, cfg); err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "d.db"), Synchronous: "normal", BusyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// Two OS processes (this test binary, run again as a helper) share one file:
// each saves a counter machine with compare-and-swap retries and claims
// expired suspensions. Every save must land exactly once and every
// suspension must be claimed by exactly one process.
const (
	helperEnv      = "MARKOV_SQLITE_HELPER_DB"
	helperSaves    = 30
	helperSuspends = 60
	helperProcs    = 3
)

var claimNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper for TestTwoProcesses")
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Start together: say ready, then wait for the parent's go.
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("no go signal: %v", err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	saveCounter(t, s, os.Getenv("MARKOV_SQLITE_HELPER_NAME"), out)
	for claimAndPrint(t, s, 2, out) > 0 {
	}
}

// saveCounter saves the counter machine helperSaves times, retrying on
// conflicts, with a claim after every save.
func saveCounter(t *testing.T, s *sqlite.Store, name string, out io.Writer) {
	ctx := context.Background()
	for i := 0; i < helperSaves; {
		snap, err := s.Load(ctx, "counter")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Save(ctx, store.Save{MachineID: "counter", Revision: snap.Revision,
			Tree: []byte(name), Append: [][]byte{fmt.Appendf(nil, "%s-%d", name, i)}})
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case err != nil:
			t.Fatal(err)
		}
		i++
		claimAndPrint(t, s, 1, out) // interleave claims with saves
	}
}

// claimAndPrint claims up to limit expired suspensions, prints their IDs
// and returns how many it claimed.
func claimAndPrint(t *testing.T, s *sqlite.Store, limit int, out io.Writer) int {
	got, err := s.ClaimExpired(context.Background(), claimNow, limit, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range got {
		fmt.Fprintf(out, "claimed %s\n", sp.ID)
	}
	return len(got)
}

func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	s := open(t, path)
	defer s.Close()
	if _, err := s.Save(ctx, store.Save{MachineID: "counter"}); err != nil {
		t.Fatal(err)
	}
	var sus []store.Suspension
	for i := range helperSuspends {
		sus = append(sus, store.Suspension{ID: fmt.Sprintf("s%03d", i), Status: store.StatusPending,
			Deadline: claimNow.Add(-time.Duration(i) * time.Minute)})
	}
	if _, err := s.Save(ctx, store.Save{MachineID: "waiting", Suspensions: sus}); err != nil {
		t.Fatal(err)
	}
	outs := runHelpers(t, path)
	checkCounter(t, s)
	checkClaims(t, outs)
}

// runHelpers starts helperProcs helpers on the database at path, lets
// them go together once each has opened it, and returns their outputs.
func runHelpers(t *testing.T, path string) []string {
	cmds := make([]*exec.Cmd, helperProcs)
	stdouts := make([]*bufio.Reader, helperProcs)
	stdins := make([]io.WriteCloser, helperProcs)
	for p := range helperProcs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"="+path, "MARKOV_SQLITE_HELPER_NAME=p"+strconv.Itoa(p))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if stdins[p], err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p], stdouts[p] = cmd, bufio.NewReader(stdout)
	}
	heads := make([]string, helperProcs)
	for p, r := range stdouts { // each says ready once its store is open
		for !strings.HasSuffix(heads[p], "ready\n") {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("helper %d before ready: %v\n%s", p, err, heads[p]+line)
			}
			heads[p] += line
		}
	}
	for _, w := range stdins {
		io.WriteString(w, "go\n")
		w.Close()
	}
	outs := make([]string, helperProcs)
	for p, cmd := range cmds {
		rest, _ := io.ReadAll(stdouts[p])
		outs[p] = heads[p] + string(rest)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", p, err, outs[p])
		}
	}
	return outs
}

// checkCounter checks that every helper's saves landed once, each
// helper's in its own order.
func checkCounter(t *testing.T, s *sqlite.Store) {
	snap, err := s.Load(context.Background(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1 + helperProcs*helperSaves); snap.Revision != want || len(snap.History) != helperProcs*helperSaves {
		t.Fatalf("counter at revision %d with %d entries, want %d and %d", snap.Revision, len(snap.History), want, helperProcs*helperSaves)
	}
	next := make([]int, helperProcs)
	for _, e := range snap.History {
		var p, i int
		if _, err := fmt.Sscanf(string(e), "p%d-%d", &p, &i); err != nil || i != next[p] {
			t.Fatalf("history entry %q out of order (want p%d-%d)", e, p, next[p])
		}
		next[p]++
	}
}

// checkClaims checks that every suspension was claimed by exactly one
// helper.
func checkClaims(t *testing.T, outs []string) {
	claimed := map[string]int{}
	perProc := map[string]int{}
	for p, out := range outs {
		for line := range strings.Lines(out) {
			id, ok := strings.CutPrefix(strings.TrimSpace(line), "claimed ")
			if !ok {
				continue
			}
			if prev, dup := claimed[id]; dup {
				t.Fatalf("%s claimed by p%d and p%d", id, prev, p)
			}
			claimed[id] = p
			perProc["p"+strconv.Itoa(p)]++
		}
	}
	t.Logf("claims per process: %v", perProc)
	if len(claimed) != helperSuspends {
		t.Fatalf("claimed %d suspensions, want %d", len(claimed), helperSuspends)
	}
}

// olderDatabase creates a database at path, runs queries on it (which
// take it back to what an older schema version left) and returns it open.
func olderDatabase(t *testing.T, path string, queries ...string) *sql.DB {
	t.Helper()
	open(t, path).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// A database written before history blocks (schema version 6) keeps a
// history in rows, one per entry: it loads as it is, whole or from any
// entry, and the machine's next save packs whole blocks of it.
func TestMigrateHistoryRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db := olderDatabase(t, path,
		`PRAGMA user_version = 6`, // as version 6 left it
		`ALTER TABLE suspension_feed DROP COLUMN machine`,
		`DROP INDEX suspensions_status_remind`, `ALTER TABLE suspensions DROP COLUMN remind_at`,
		`DROP TABLE audit_log`, `DROP TABLE audit_head`, `DROP TABLE rule_uses`, `DROP TABLE rule_counts`,
		`DROP TABLE effects`, `DROP TABLE records`,
		`DROP TABLE parked`,
		`ALTER TABLE replays DROP COLUMN outcome`,
		`DROP TABLE event_floors`,
		`DROP TABLE history_blocks`, `ALTER TABLE machines DROP COLUMN packed`,
		`INSERT INTO machines (id, revision, tree, history_len, updated_at, incarnation) VALUES ('m', 1, x'74', 300, 0, 7)`,
		`INSERT INTO history (machine_id, seq, data)
			WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 299) SELECT 'm', i, CAST('e' || i AS BLOB) FROM c`,
	)
	defer db.Close()
	var want []string
	for i := range 301 {
		want = append(want, "e"+strconv.Itoa(i))
	}
	s := open(t, path)
	defer s.Close()
	check := func(n int) {
		t.Helper()
		for from := 0; from <= n; from++ {
			snap, err := s.LoadTail(ctx, "m", from)
			if err != nil {
				t.Fatalf("LoadTail(m, %d): %v", from, err)
			}
			if got := fmt.Sprintf("%s", snap.History); snap.HistoryFrom != from || got != fmt.Sprintf("%s", want[from:n]) {
				t.Fatalf("LoadTail(m, %d) = %s from %d, want %s", from, got, snap.HistoryFrom, want[from:n])
			}
		}
	}
	check(300)
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Revision: 1, Tree: []byte("t"), Append: [][]byte{[]byte("e300")}}); err != nil {
		t.Fatal(err)
	}
	check(301)
	var rows, blocks int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM history), (SELECT count(*) FROM history_blocks)`).Scan(&rows, &blocks); err != nil {
		t.Fatal(err)
	}
	if rows+blocks >= 301 || blocks == 0 {
		t.Errorf("after a save, %d history rows and %d blocks: none packed", rows, blocks)
	}
}

// A database written before event floors (schema version 7) is upgraded
// on open: a machine that logged there, deleted after the upgrade and
// created again, logs after the deleted log's last event.
func TestMigrateEventFloors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	olderDatabase(t, path,
		`PRAGMA user_version = 7`, // as version 7 left it
		`ALTER TABLE suspension_feed DROP COLUMN machine`,
		`DROP INDEX suspensions_status_remind`, `ALTER TABLE suspensions DROP COLUMN remind_at`,
		`DROP TABLE audit_log`, `DROP TABLE audit_head`, `DROP TABLE rule_uses`, `DROP TABLE rule_counts`,
		`DROP TABLE effects`, `DROP TABLE records`,
		`DROP TABLE parked`,
		`ALTER TABLE replays DROP COLUMN outcome`,
		`DROP TABLE event_floors`,
		`INSERT INTO machines (id, revision, tree, history_len, updated_at, incarnation) VALUES ('m', 1, x'74', 0, 0, 7)`,
		`INSERT INTO events (machine_id, seq, data, at) VALUES ('m', 1, x'61', 0), ('m', 2, x'62', 0)`,
	).Close()
	s := open(t, path)
	defer s.Close()
	storetest.CheckLogAcrossDelete(t, s, "m", 2)
}

// A database written at schema version 1, whose index may hold statuses
// that are none of store.Statuses, is upgraded on open: its rows keep
// working, and a free-form status that had left pending reads "resolved".
func TestMigrateLegacyStatuses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	olderDatabase(t, path,
		`PRAGMA user_version = 1`, // as version 1 left it
		`DROP INDEX suspensions_status_remind`, `ALTER TABLE suspensions DROP COLUMN remind_at`,
		`DROP TABLE audit_log`, `DROP TABLE audit_head`, `DROP TABLE rule_uses`, `DROP TABLE rule_counts`,
		`DROP TABLE effects`, `DROP TABLE records`,
		`DROP TABLE parked`,
		`DROP TABLE replays`,
		`DROP TABLE suspend_requests`,
		`DROP INDEX suspensions_event`,
		`ALTER TABLE suspensions DROP COLUMN event`,
		`DROP TABLE events`, `DROP TABLE suspension_feed`, `DROP TABLE live_events`,
		`ALTER TABLE machines DROP COLUMN incarnation`,
		`DROP TABLE history_blocks`, `ALTER TABLE machines DROP COLUMN packed`,
		`DROP TABLE event_floors`,
		`INSERT INTO machines (id, revision, tree, history_len, updated_at) VALUES ('m', 3, x'74', 0, 0)`,
		`INSERT INTO suspensions (id, machine_id, status, kind, name, reason, deadline) VALUES
			('old-pending', 'm', 'pending', 'tool', 'ask', 'r', 1),
			('old-resolved', 'm', 'resolved', 'tool', 'ask', 'r', NULL),
			('old-partial', 'm', 'expired', 'tool', 'ask', 'r', NULL),
			('old-custom', 'm', 'timed_out', 'tool', 'ask', 'r', NULL)`,
	).Close()

	s := open(t, path)
	defer s.Close()
	want := map[string]store.Status{"old-pending": store.StatusPending, "old-resolved": store.StatusResolved,
		"old-partial": store.StatusExpired, "old-custom": store.StatusResolved}
	for id, st := range want {
		got, err := s.FindSuspension(ctx, id)
		if err != nil || got.Status != st {
			t.Fatalf("FindSuspension(%s) after the upgrade = %+v, %v; want status %s", id, got, err, st)
		}
	}
	if got, err := s.ListSuspensions(ctx, store.Filter{Status: store.StatusResolved}); err != nil || len(got) != 2 {
		t.Fatalf("resolved after the upgrade = %v, %v; want old-custom and old-resolved", got, err)
	}
	if got, err := s.ClaimExpired(ctx, claimNow, 0, time.Minute); err != nil || len(got) != 1 || got[0].ID != "old-pending" {
		t.Fatalf("ClaimExpired after the upgrade = %v, %v; want old-pending", got, err)
	}
	snap, err := s.Load(ctx, "m")
	if err != nil || snap.Revision != 3 {
		t.Fatalf("Load after the upgrade = %+v, %v", snap, err)
	}
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Revision: 3}); err != nil {
		t.Fatalf("Save after the upgrade: %v", err)
	}
}

// The replay guard deletes expired records as it goes.
func TestReplayRecordsCleaned(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "replays.db")
	s := open(t, path)
	defer s.Close()
	for i, at := range []time.Time{time.Now().Add(-time.Hour), time.Now().Add(-time.Minute), time.Now().Add(time.Hour)} {
		if fresh, err := s.Remember(ctx, fmt.Sprintf("k%d", i), at); err != nil || !fresh {
			t.Fatalf("Remember(k%d) = %v, %v", i, fresh, err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys string
	if err := db.QueryRow(`SELECT group_concat(key) FROM replays`).Scan(&keys); err != nil || keys != "k2" {
		t.Fatalf("replays left = %q, %v; want only the live k2", keys, err)
	}
}

func TestPing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "markov.db")
	s := open(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storetest.Ping(t, s, func(newer bool) {
		v := sqlite.SchemaVersion
		if newer {
			v++
		}
		if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
			t.Fatal(err)
		}
	})
	// The error names the store.
	s = open(t, path)
	defer s.Close()
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", sqlite.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); !strings.HasPrefix(err.Error(), "sqlite: ping: ") {
		t.Fatalf("Ping = %v, want an error prefixed sqlite: ping:", err)
	}
}
