package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
)

// seed makes a database at path with one machine and one pending
// suspension.
func seed(t *testing.T, path string) {
	t.Helper()
	s := open(t, path)
	defer s.Close()
	if _, err := s.Save(context.Background(), store.Save{MachineID: "m1", Tree: []byte("t"), Append: [][]byte{[]byte("a")},
		Suspensions: []store.Suspension{{ID: "s1", Status: store.StatusPending}}}); err != nil {
		t.Fatal(err)
	}
}

// checkReads opens path with cfg and reads the seeded machine and its
// suspension back.
func checkReads(t *testing.T, cfg sqlite.Config) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { s.Close() })
	if snap, err := s.Load(ctx, "m1"); err != nil || string(snap.Tree) != "t" {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
	if got, err := s.ListSuspensions(ctx, store.Filter{Status: store.StatusPending}); err != nil || len(got) != 1 || got[0].ID != "s1" {
		t.Fatalf("ListSuspensions = %v, %v", got, err)
	}
	return s
}

// Opening a database whose schema is current takes no write lock: it
// succeeds while another connection holds one (before, the migration's
// BEGIN IMMEDIATE waited out the busy timeout and failed).
func TestOpenCurrentSchemaTakesNoWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "markov.db")
	seed(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // cleanup
	for _, ro := range []bool{false, true} {
		checkReads(t, sqlite.Config{Path: path, BusyTimeout: 50 * time.Millisecond, ReadOnly: ro})
	}
}

func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "markov.db")
	seed(t, path)
	s := checkReads(t, sqlite.Config{Path: path, ReadOnly: true})
	if _, err := s.Save(ctx, store.Save{MachineID: "m2"}); !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("Save = %v, want ErrReadOnly", err)
	}
	if err := s.Delete(ctx, "m1"); !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("Delete = %v, want ErrReadOnly", err)
	}
	if _, err := s.ClaimExpired(ctx, time.Now(), 1, time.Minute); !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("ClaimExpired = %v, want ErrReadOnly", err)
	}
	checkReads(t, sqlite.Config{Path: path})

	// A missing file is not created; an empty one (schema version 0) is
	// refused, not migrated.
	missing := filepath.Join(dir, "missing.db")
	if s, err := sqlite.Open(ctx, sqlite.Config{Path: missing, ReadOnly: true}); err == nil {
		s.Close()
		t.Fatal("read-only Open of a missing file succeeded")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open created %s: %v", missing, err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(ctx, sqlite.Config{Path: empty, ReadOnly: true}); err == nil {
		s.Close()
		t.Fatal("read-only Open of an unmigrated file succeeded")
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("read-only Open wrote to the unmigrated file: %v, %v", fi, err)
	}
}

// unwritableEnv names the database TestUnwritableDatabase's child reads.
const unwritableEnv = "MARKOV_SQLITE_UNWRITABLE_DB"

// A database file the process may read but not write (0444) is opened and
// listed. "live" databases are held open by a writer (this process), so
// their -wal and -shm files exist and belong to it; the others have none.
// In a writable directory the default Config reads them; in a read-only
// one Config.ReadOnly does. Root ignores file modes, so when the test runs
// as root it runs the reads in a copy of the test binary as the user
// nobody.
func TestUnwritableDatabase(t *testing.T) {
	if top := os.Getenv(unwritableEnv); top != "" {
		checkUnwritable(t, top)
		return
	}
	// MkdirTemp makes a directory only its owner may enter.
	top, err := os.MkdirTemp("", "markov-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range unwritableDirs {
			_ = os.Chmod(filepath.Join(top, d), 0o755)
		}
		os.RemoveAll(top)
	})
	for _, d := range unwritableDirs {
		if err := os.Mkdir(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(top, d, "markov.db")
		seed(t, path)
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(d, "-live") {
			checkReads(t, sqlite.Config{Path: path}) // stays open until the test ends
		}
		mode := os.FileMode(0o777)
		if strings.HasPrefix(d, "ro") {
			mode = 0o555
		}
		if err := os.Chmod(filepath.Join(top, d), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		checkUnwritable(t, top)
		return
	}
	bin := filepath.Join(top, "sqlite.test")
	copyFile(t, os.Args[0], bin)
	cmd := exec.Command(bin, "-test.run=^TestUnwritableDatabase$", "-test.v")
	cmd.Env = append(os.Environ(), unwritableEnv+"="+top)
	cmd.Dir = top
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot run a process as nobody here (%v): the file modes cannot be tested as root", err)
	}
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
}

// unwritableDirs are TestUnwritableDatabase's directories: "rw" ones are
// writable, "ro" ones not; "-live" databases are held open by a writer.
var unwritableDirs = []string{"rw", "rw-live", "ro", "ro-live"}

// checkUnwritable runs as a user who cannot write the databases under top.
func checkUnwritable(t *testing.T, top string) {
	for _, d := range unwritableDirs {
		path := filepath.Join(top, d, "markov.db")
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
			t.Fatal("the test user can write the database: the test proves nothing")
		}
		if strings.HasPrefix(d, "rw") {
			s := checkReads(t, sqlite.Config{Path: path})
			if _, err := s.Save(context.Background(), store.Save{MachineID: "m2"}); err == nil {
				t.Fatalf("%s: Save to a read-only file succeeded", d)
			}
		}
		checkReads(t, sqlite.Config{Path: path, ReadOnly: true})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
