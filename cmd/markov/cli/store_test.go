package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// A bad store choice is a usage error that shows no password; an
// unreachable database fails the command with a readable error; so do the
// fleet's flags.
func TestFleetCommandLine(t *testing.T) {
	charter := refundCharter(t)
	db := filepath.Join(t.TempDir(), "test.db")
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"bad port", []string{"pending", "--store", "postgres://u:s3cret@host:xx/db"}, ExitUsage, "markov pending: --store: not a PostgreSQL URL (postgres://user:password@host:port/database?sslmode=disable): cannot parse `postgres://u:xxxxx@host:xx/db`: invalid port"},
		{"bad sslmode", []string{"--store", "postgresql://u:s3cret@h/db?sslmode=maybe", "inspect"}, ExitUsage, "sslmode is invalid"},
		{"schema on SQLite", []string{"pending", "--db", db, "--schema", "x"}, ExitUsage, "markov pending: --schema is for a PostgreSQL store (--store postgres://…), not the SQLite file " + db},
		{"unreachable", []string{"pending", "--store", "postgres://u:s3cret@127.0.0.1:" + closedPort(t) + "/db?sslmode=disable"}, ExitError, "markov: open postgres://u@127.0.0.1:"},
		{"worker on SQLite", []string{"worker", "--db", db}, ExitError, "markov: there is no fleet on SQLite (" + db + "): worker needs a PostgreSQL store (--store postgres://…)\n"},
		{"worker without workers", []string{"worker", "--workers", "0"}, ExitUsage, "markov worker: --workers must be at least 1"},
		{"serve negative workers", []string{"serve", "--workers", "-1"}, ExitUsage, "markov serve: --workers must be at least 0"},
		{"worker bad timeout", []string{"worker", "--shutdown-timeout", "0s"}, ExitUsage, "--shutdown-timeout must be positive"},
		{"worker bad take-over", []string{"worker", "--take-over-after", "0s"}, ExitUsage, "markov worker: --take-over-after and --rescue-after must be positive"},
		{"worker bad fetch cooldown", []string{"worker", "--fetch-cooldown", "2s"}, ExitUsage, "markov worker: --fetch-cooldown must be from 1ms to 1s"},
		{"serve bad fetch cooldown", []string{"serve", "--fetch-cooldown", "0s"}, ExitUsage, "markov serve: --fetch-cooldown must be from 1ms to 1s"},
		{"serve bad rescue", []string{"serve", "--rescue-after", "-1s"}, ExitUsage, "markov serve: --take-over-after and --rescue-after must be positive"},
		{"max-wait over write-timeout", []string{"serve", "--write-timeout", "10s"}, ExitUsage, "markov serve: --max-wait 1m0s must be under --write-timeout 10s"},
		{"bad trusted proxy", []string{"serve", "--trusted-proxies", "10.0.0.0/8, proxy.local"}, ExitUsage, `markov serve: --trusted-proxies: "proxy.local" is neither a CIDR nor an address`},
		{"bad failure burst", []string{"serve", "--failure-burst", "0"}, ExitUsage, "markov serve: --max-body, --failure-burst and --failure-refill must be positive"},
		{"negative retries", []string{"serve", "--retries", "-1"}, ExitUsage, "markov serve: --retries must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, charter, tt.args...)
			require.Equal(t, tt.code, res.code, res.stderr)
			require.Contains(t, res.stderr, tt.stderr)
			require.NotContains(t, res.stderr, "s3cret")
			require.Empty(t, res.stdout)
		})
	}
	require.NoFileExists(t, db, "no command above creates the database")
}

// closedPort returns a local TCP port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	return port
}

// The commands work the same on PostgreSQL.
func TestCommandsOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	charter := refundCharter(t)
	pg := func(args ...string) result {
		t.Helper()
		return run(t, charter, append(args, "--store", url, "--schema", schema)...)
	}
	name := regexp.MustCompile(`^postgres://\S+@\S+ \(schema ` + schema + `\)$`)

	res := pg("inspect")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Regexp(t, name, strings.TrimPrefix(strings.TrimSpace(res.stdout), "no machines in "))
	res = pg("create", "support")
	require.Equal(t, ExitOK, res.code, res.stderr)
	id := strings.TrimSpace(res.stdout)
	res = pg("run", id, "Hi, the blender from order A-1042 arrived broken. Can I get my $89.90 back?")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "1 call(s) still pending")

	res = pg("pending", "-o", "json")
	require.Equal(t, ExitOK, res.code, res.stderr)
	var list []Call
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &list))
	require.Len(t, list, 1)
	require.Equal(t, id, list[0].MachineID)
	res = pg("resume", list[0].SuspendID, `{"approved":true,"manager":"dana"}`)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "final answer: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana.")
	res = pg("resume", list[0].SuspendID, `{"approved":true,"manager":"dana"}`)
	require.Equal(t, ExitError, res.code)
	require.Contains(t, res.stderr, "not pending; nothing changed")
	res = pg("inspect", id)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "machine "+id)

	res = pg("parked")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Regexp(t, `^no parked machines in postgres://`, res.stdout)
	res = pg("parked", "-o", "json")
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Equal(t, "[]\n", res.stdout)
}

// On SQLite, parked lists the machines the sweeper could not run.
func TestParkedOnSQLite(t *testing.T) {
	charter := refundCharter(t)
	db, machineID, _ := parked(t, charter)
	res := run(t, charter, "parked", "--db", db)
	require.Equal(t, ExitOK, res.code, res.stderr)
	require.Equal(t, "no parked machines in "+db+"\n", res.stdout)

	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	require.NoError(t, err)
	require.NoError(t, st.Park(ctx, machineID, "decode machine: bad tree", time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)))
	require.NoError(t, st.Close())
	res = run(t, charter, "parked", "--db", db)
	require.Equal(t, ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 2, res.stdout)
	require.Regexp(t, `^`+machineID+`\s+sweep\s+2026-11-28T12:00:00Z\s+1\s+decode machine: bad tree$`, lines[1])
}

// parked lists the machines a fleet gave up on, with their errors.
func TestParkedOnPostgres(t *testing.T) {
	st, url, schema := pgtest.Open(t)
	model := scripted.Func(func(*llm.Request) (scripted.Reply, error) { return scripted.Reply{}, errors.New("the model is down") })
	charter := waitCharter(t, model, 0)
	f, err := fleet.New(fleet.Config{Store: st, Charter: charter, MaxAttempts: 1, Workers: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := f.Runner().Create(ctx, "", "waiter", nil)
	require.NoError(t, err)
	require.NoError(t, f.Start(ctx))
	defer func() { require.NoError(t, f.Stop(context.WithoutCancel(ctx))) }()
	_, err = f.Send(ctx, id, machine.UserText("run CI"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := f.Parked(ctx, 10)
		return err == nil && len(p) == 1
	}, 50*time.Second, 50*time.Millisecond)

	res := run(t, charter, "parked", "--store", url, "--schema", schema)
	require.Equal(t, ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 2, res.stdout)
	require.Regexp(t, `^MACHINE\s+JOB\s+PARKED AT\s+ATTEMPTS\s+LAST ERROR$`, lines[0])
	require.Regexp(t, `^`+id+`\s+markov_run \d+\s+\d{4}-\d\d-\d\dT\S+Z\s+1\s+.*the model is down`, lines[1])

	res = run(t, charter, "parked", "--store", url, "--schema", schema, "-o", "json")
	require.Equal(t, ExitOK, res.code, res.stderr)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Len(t, got, 1)
	require.Equal(t, id, got[0]["machine_id"])
	require.Equal(t, "markov_run", got[0]["kind"])
	require.NotZero(t, got[0]["job"])
	require.NotEmpty(t, got[0]["parked_at"])
	require.Len(t, got[0]["errors"], 1)
	require.Contains(t, got[0]["errors"].([]any)[0], "the model is down")
}

// On SQLite the console has no fleet: its fleet view says so (404), and
// does not fail on a nil fleet.
func TestServeConsoleWithoutFleet(t *testing.T) {
	c := &CLI{Charter: refundCharter(t)}
	c.SetDB(filepath.Join(t.TempDir(), "test.db"))
	db, err := c.Open(context.Background(), false)
	require.NoError(t, err)
	defer db.Close()
	require.Nil(t, db.Fleet)
	h, _, err := c.serveHandler(&serveConfig{secret: []byte(childSecret), ui: consoleFlags{enabled: true, header: "X-Test-User"}}, db)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	require.Equal(t, http.StatusNotFound, getStatus(t, srv.URL+"/ui/fleet", http.Header{"X-Test-User": {"dana"}}))
	require.Equal(t, http.StatusOK, getStatus(t, srv.URL+"/ui/", http.Header{"X-Test-User": {"dana"}}))
}

// serve's every API answer is JSON, a redirect of an unclean path too:
// the probes and the console are routed in front of the API without a
// ServeMux of serve's own, whose redirects have HTML bodies.
func TestServeRedirectsAreJSON(t *testing.T) {
	c := &CLI{Charter: refundCharter(t)}
	c.SetDB(filepath.Join(t.TempDir(), "test.db"))
	db, err := c.Open(context.Background(), false)
	require.NoError(t, err)
	defer db.Close()
	for _, ui := range []bool{false, true} {
		h, _, err := c.serveHandler(&serveConfig{secret: []byte(childSecret), ui: consoleFlags{enabled: ui, header: "X-Test-User"}}, db)
		require.NoError(t, err)
		srv := httptest.NewServer(h)
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, path := range []string{"//suspensions", "/machines/../suspensions", "/healthz/../suspensions"} {
			req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			require.NoError(t, err)
			resumehttp.SignRequest([]byte(childSecret), req, nil, time.Now())
			resp, err := noFollow.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.True(t, resp.StatusCode >= 300 && resp.StatusCode < 400, "console %v, %s: %d", ui, path, resp.StatusCode)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "console %v, %s", ui, path)
			var eb resumehttp.ErrorBody
			require.NoError(t, json.Unmarshal(b, &eb), "console %v, %s: %s", ui, path, b)
			require.Equal(t, "redirect", eb.Code)
		}
		srv.Close()
	}
}

// serve's limits are its flags': behind a trusted proxy, the failure limit
// keys each forwarded client apart; a client over its burst gets 429, the
// proxy's other clients are served; and the body cap is --max-body.
func TestServeLimitFlags(t *testing.T) {
	c := &CLI{Charter: refundCharter(t), Getenv: func(string) string { return childSecret }}
	c.SetDB(filepath.Join(t.TempDir(), "test.db"))
	cfg, err := c.parseServe([]string{"--trusted-proxies", "127.0.0.1, 10.0.0.0/8", "--failure-burst", "1", "--failure-refill", "1h", "--max-body", "100"})
	require.NoError(t, err)
	db, err := c.Open(context.Background(), false)
	require.NoError(t, err)
	defer db.Close()
	h, _, err := c.serveHandler(cfg, db)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	send := func(client string, secret []byte, body string) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/suspensions/s1/resume", strings.NewReader(body))
		require.NoError(t, err)
		resumehttp.SignRequest(secret, req, []byte(body), time.Now())
		req.Header.Set("X-Forwarded-For", client)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong := []byte("another secret, just as long as the real one")
	require.Equal(t, http.StatusUnauthorized, send("198.51.100.1", wrong, "{}"))
	require.Equal(t, http.StatusTooManyRequests, send("198.51.100.1", wrong, "{}"))
	require.Equal(t, http.StatusNotFound, send("198.51.100.2", []byte(childSecret), `{"payload":1}`), "another client of the proxy is served")
	require.Equal(t, http.StatusRequestEntityTooLarge, send("198.51.100.3", []byte(childSecret), `{"payload":"`+strings.Repeat("x", 100)+`"}`))
}
