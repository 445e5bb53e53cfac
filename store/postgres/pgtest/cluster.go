package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/internal/testkit"
)

// BinDirEnv names the directory of PostgreSQL's initdb and pg_ctl when
// they are not on the PATH; .ci/run sets it when it provides them, and a
// test that needs a cluster of its own then fails under CI rather than
// skip.
const BinDirEnv = "MARKOV_PG_BINDIR"

// Cluster is a throwaway PostgreSQL server a test starts for itself (see
// NewCluster): a test may restart it, which the shared server at
// MARKOV_TEST_POSTGRES must never be.
type Cluster struct {
	// URL is the connection string of its database "postgres".
	URL string

	bin, data, log string
	port           int
}

// NewCluster initialises a cluster in a directory of its own, starts it
// on a free port of 127.0.0.1 and stops and deletes it when tb ends.
// Without initdb and pg_ctl it skips tb, naming how to get them (it fails
// under CI when BinDirEnv is set: CI provides them).
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bin, err := binDir()
	if err != nil {
		if os.Getenv(BinDirEnv) == "" {
			tb.Skipf("a throwaway PostgreSQL cluster needs initdb and pg_ctl (%v); to run this test: apt-get install postgresql, or set %s", err, BinDirEnv)
		}
		testkit.Require(tb, err, "initdb and pg_ctl", "apt-get install postgresql, and set "+BinDirEnv)
	}
	dir, err := os.MkdirTemp("", "markov-cluster-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	c := &Cluster{bin: bin, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log")}
	if err := ownDir(dir); err != nil {
		tb.Fatalf("cluster directory: %v", err)
	}
	if out, err := c.run("initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"); err != nil {
		tb.Fatalf("initdb: %v: %s", err, out)
	}
	if c.port, err = freePort(); err != nil {
		tb.Fatal(err)
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	tb.Cleanup(func() { _, _ = c.run("pg_ctl", "-D", c.data, "-m", "immediate", "stop") })
	if out, err := c.run("pg_ctl", "-D", c.data, "-l", c.log, "-w", "-t", "60", "-o", c.options(dir), "start"); err != nil {
		tb.Fatalf("pg_ctl start: %v: %s", err, out)
	}
	return c
}

// Restart restarts the server (pg_ctl restart, fast shutdown: every
// session is cut) and returns once it accepts connections again.
func (c *Cluster) Restart() error {
	if out, err := c.run("pg_ctl", "-D", c.data, "-l", c.log, "-w", "-t", "60", "-m", "fast", "restart"); err != nil {
		return fmt.Errorf("pg_ctl restart: %w: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL)
		if err == nil {
			return conn.Close(ctx)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the restarted server does not answer: %w", err)
		}
		time.Sleep(50 * time.Millisecond) // polling the server until it answers
	}
}

// options are the server's options: its port, socket directory, and
// enough connections for a fleet's processes.
func (c *Cluster) options(dir string) string {
	return "-p " + strconv.Itoa(c.port) + " -k " + dir + " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
}

// run runs the PostgreSQL program name (as the postgres user when this
// process is root: the server refuses to run as root).
func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", slices.Concat([]string{"-u", "postgres", "--", path}, args)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	return cmd.CombinedOutput()
}

// binDir finds the directory of initdb and pg_ctl: BinDirEnv, the PATH,
// or Debian's /usr/lib/postgresql/VERSION/bin.
func binDir() (string, error) {
	candidates := []string{os.Getenv(BinDirEnv)}
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.Reverse(debian)
	for _, d := range append(candidates, debian...) {
		if d == "" {
			continue
		}
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errors.New("initdb and pg_ctl not found")
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// ownDir gives dir to the postgres user when this process is root.
func ownDir(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
