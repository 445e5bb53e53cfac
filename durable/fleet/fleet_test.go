package fleet_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

var (
	machines = flag.Int("fleet.machines", 200, "machines the fleet test drives")
	workers  = flag.Int("fleet.workers", 3, "worker processes of the fleet test")
)

// latencyEnv, when set to a duration, is the model's latency in this
// process and in the worker processes it starts (2 ms if unset).
const latencyEnv = "FLEET_MODEL_LATENCY"

// The test binary doubles as a worker process: with FLEET_WORKER set it
// runs a fleet worker until SIGTERM (or SIGKILL).
func TestMain(m *testing.M) {
	testkit.Main(m, "FLEET_WORKER", func(role string) int {
		if by, ok := strings.CutPrefix(role, "decide:"); ok {
			return decider(by)
		}
		return worker()
	})
}

type desk struct{}

type effectIn struct {
	Key string `json:"key"`
}

type askIn struct {
	TimeoutMS int `json:"timeout_ms"`
}

// sideEffects is the pool the effect tool and the resume handler record
// through (the database's side tables, in the test's schema).
var sideEffects struct {
	pool   *pgxpool.Pool
	schema string
}

func side(sql string) string {
	return strings.ReplaceAll(sql, "{s}", pgx.Identifier{sideEffects.schema}.Sanitize())
}

// charter: the model calls effect, then ask (which suspends), then effect
// again, then ends. effect records every execution with its idempotency
// key (root instance ID + the call's key) and makes its effect once per
// key; ask's resume handler records every run.
func charter() (*machine.Charter, error) {
	effect := node.NewTool("effect", "make an external effect", func(ctx *node.ToolContext[desk], in effectIn) (string, error) {
		key := ctx.InstanceID() + "/" + in.Key
		if err := sideExec(ctx, `INSERT INTO {s}.executions (key, pid) VALUES ($1, $2)`, key, os.Getpid()); err != nil {
			return "", err
		}
		if os.Getenv(journalEnv) != "" {
			if _, err := journaledEffect(ctx); err != nil {
				return "", err
			}
		}
		return "done", sideExec(ctx, `INSERT INTO {s}.made_effects (key) VALUES ($1) ON CONFLICT DO NOTHING`, key)
	})
	ask := node.NewTool("ask", "ask for approval", func(ctx *node.ToolContext[desk], in askIn) (string, error) {
		return "", ctx.Suspend("approval", instance.WithTimeout(time.Duration(in.TimeoutMS)*time.Millisecond))
	}, node.OnResume(func(ctx *node.ToolContext[desk], _ askIn, r node.Resumed[json.RawMessage]) (string, error) {
		if os.Getenv(hangEnv) != "" {
			return hang(ctx, r.SuspendID)
		}
		if err := sideExec(ctx, `INSERT INTO {s}.handler_runs (suspend_id, pid) VALUES ($1, $2)`, r.SuspendID, os.Getpid()); err != nil {
			return "", err
		}
		// Heard by tests that wait for handler runs (listenHandlers).
		if err := sideExec(ctx, `SELECT pg_notify($1, $2)`, sideEffects.schema+"_handler", r.SuspendID); err != nil {
			return "", err
		}
		return instance.Decode[string](r.Payload)
	}))
	pay := node.NewTool("pay", "pay; two approvers decide", func(ctx *node.ToolContext[desk], in askIn) (string, error) {
		return "", ctx.Suspend("payment", instance.WithPolicy(payPolicy))
	})
	escalate := node.NewTool("escalate", "pay; bo decides, or cy after the deadline", func(ctx *node.ToolContext[desk], in askIn) (string, error) {
		return "", ctx.Suspend("payment", instance.WithPolicy(escalatePolicy), instance.WithTimeout(time.Duration(in.TimeoutMS)*time.Millisecond),
			instance.OnTimeoutDeny("nobody answered"))
	})
	remind := node.NewTool("remind", "pay; bo decides, reminded every second", func(ctx *node.ToolContext[desk], in askIn) (string, error) {
		return "", ctx.Suspend("payment", instance.WithPolicy(remindPolicy), instance.WithTimeout(time.Duration(in.TimeoutMS)*time.Millisecond),
			instance.OnTimeoutDeny("nobody answered"))
	})
	editable := node.NewTool("pay-editable", "pay; two approvers decide, and may edit", func(ctx *node.ToolContext[desk], in askIn) (string, error) {
		p := payPolicy
		p.AllowEdit = true
		return "", ctx.Suspend("payment", instance.WithPolicy(p))
	})
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{effect, ask, pay, escalate, remind, editable}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: model(), Nodes: []*node.Node{n}})
}

// model is deterministic from the transcript: tool-use IDs come from its
// length, so a retry after a crash makes the same calls.
func model() llm.Model {
	latency, err := time.ParseDuration(os.Getenv(latencyEnv))
	if err != nil {
		latency = 2 * time.Millisecond
	}
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		results, mode := 0, ""
		for _, m := range req.Messages {
			switch m.Role {
			case message.Tool:
				results++
			case message.User:
				mode = m.Text()
			}
		}
		id := fmt.Sprintf("t%d", len(req.Messages))
		r := scripted.Reply{Latency: latency}
		switch results {
		case 0:
			r.Calls = []scripted.Call{{ID: id, Name: "effect", Input: effectIn{Key: "before"}}}
		case 1:
			timeout := time.Hour
			if mode == "expire" {
				timeout = 1500 * time.Millisecond
			}
			if ms, ok := strings.CutPrefix(mode, "timeout "); ok {
				n, _ := strconv.Atoi(ms)
				timeout = time.Duration(n) * time.Millisecond
			}
			r.Calls = []scripted.Call{{ID: id, Name: "ask", Input: askIn{TimeoutMS: int(timeout.Milliseconds())}}}
			switch mode {
			case "govern":
				r.Calls[0].Name = "pay"
			case "govern-edit":
				r.Calls[0].Name = "pay-editable"
			case "escalate":
				r.Calls[0].Name, r.Calls[0].Input = "escalate", askIn{TimeoutMS: 300}
			case "remind":
				r.Calls[0].Name, r.Calls[0].Input = "remind", askIn{TimeoutMS: 8000}
			}
		case 2:
			r.Calls = []scripted.Call{{ID: id, Name: "effect", Input: effectIn{Key: "after"}}}
		default:
			r.Text = "all done"
		}
		return r, nil
	})
}

func openFleet(ctx context.Context, url, schema string) (*fleet.Fleet, *postgres.Store, error) {
	s, err := postgres.Open(ctx, postgres.Config{ConnString: url, Schema: schema})
	if err != nil {
		return nil, nil, err
	}
	sideEffects.pool, sideEffects.schema = s.Pool(), schema
	c, err := charter()
	if err != nil {
		return nil, nil, err
	}
	f, err := fleet.New(fleet.Config{Store: s, Charter: c, Workers: 8, RescueAfter: 2 * time.Second, BusySnooze: 100 * time.Millisecond})
	return f, s, err
}

func worker() int {
	ctx := context.Background()
	f, s, err := openFleet(ctx, os.Getenv("FLEET_URL"), os.Getenv("FLEET_SCHEMA"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer s.Close()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if dir := os.Getenv(profileEnv); dir != "" {
		stop, err := profileCPU(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 2
		}
		defer stop()
	}
	if err := f.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	fmt.Println("ready")
	<-term
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.Stop(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker stop:", err)
		return 1
	}
	return 0
}

// profileEnv, when set to a directory in a worker process, writes the
// worker's CPU profile there (worker-PID.pprof) when it stops.
const profileEnv = "FLEET_CPU_PROFILE"

// profileCPU starts a CPU profile into dir and returns what stops it.
func profileCPU(dir string) (stop func(), err error) {
	out, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.pprof", os.Getpid())))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// openTestFleet opens a fleet (not started) in a schema of its own, with
// the side tables of the charter's tools; the store closes when the test
// ends. It returns the connection string and schema for worker processes.
func openTestFleet(t testing.TB) (f *fleet.Fleet, s *postgres.Store, url, schema string) {
	t.Helper()
	url = pgtest.URL(t)
	schema = pgtest.Schema(t, url)
	ctx := context.Background()
	f, s, err := openFleet(ctx, url, schema)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, createSideTables(ctx, s))
	return f, s, url, schema
}

// startWorker starts a worker process and waits until it works jobs.
func startWorker(url, schema string) (*exec.Cmd, error) {
	cmd := testkit.ChildCommand("FLEET_WORKER=1", "FLEET_URL="+url, "FLEET_SCHEMA="+schema)
	if err := testkit.StartChild(cmd, "ready"); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return cmd, nil
}

// TestFleet drives machines through suspend → resume / cancel / expire on
// worker processes sharing one PostgreSQL while SIGKILLing them at random
// moments, and checks that nothing is lost or applied twice: every
// machine finishes, every suspension left pending once, the way it was
// meant to, and no idempotency key has two completed effects.
// Re-executions of a tool (same key, only after a kill) are reported.
func TestFleet(t *testing.T) {
	f, s, url, schema := openTestFleet(t)
	ctx := context.Background()

	var err error
	procs := make([]*exec.Cmd, *workers)
	for i := range procs {
		procs[i], err = startWorker(url, schema)
		require.NoError(t, err)
	}
	defer func() {
		for _, p := range procs {
			stopWorker(p)
		}
	}()

	mode := sendModes(t, f, *machines)

	// Kill a random worker every 200-700 ms for the first seconds, and
	// start a new one in its place.
	kills := 0
	var killer sync.WaitGroup
	stopKilling := make(chan struct{})
	killer.Go(func() {
		var err error
		for kills < 8 {
			select {
			case <-stopKilling:
				return
			case <-time.After(time.Duration(200+rand.IntN(500)) * time.Millisecond):
			}
			i := rand.IntN(len(procs))
			procs[i].Process.Kill()
			procs[i].Wait()
			kills++
			if procs[i], err = startWorker(url, schema); err != nil {
				t.Error(err)
				return
			}
		}
	})

	answerUntilDone(t, f, s, mode)
	close(stopKilling)
	killer.Wait()

	// Every machine finished with each suspension resolved once, the right way.
	for id, md := range mode {
		checkMachine(t, f, id, md)
	}

	var effects, executions, handlers, resumed int
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.made_effects`)).Scan(&effects))
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.executions`)).Scan(&executions))
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*), count(DISTINCT suspend_id) FROM {s}.handler_runs`)).Scan(&handlers, &resumed))
	require.Equal(t, 2**machines, effects, "one completed effect per idempotency key")
	require.Equal(t, *machines/3+boolInt(*machines%3 > 0), resumed, "every resumed suspension ran its handler")
	t.Logf("%d machines, %d worker processes, %d SIGKILLs: %d tool executions for %d keys (%d re-executions after kills); %d resume-handler runs for %d resumes",
		*machines, *workers, kills, executions, effects, executions-effects, handlers, resumed)
}

// sendModes creates n machines and sends each its mode — resume, cancel
// or expire, in turn — and returns the modes by machine ID.
func sendModes(t *testing.T, f *fleet.Fleet, n int) map[string]string {
	ctx := context.Background()
	modes := []string{"resume", "cancel", "expire"}
	mode := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("m%03d", i)
		mode[id] = modes[i%len(modes)]
		_, err := f.Runner().Create(ctx, id, "desk", nil)
		require.NoError(t, err)
		_, err = f.Send(ctx, id, machine.UserText(mode[id]))
		require.NoError(t, err)
	}
	return mode
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// diagnose logs what the machines that did not finish look like.
func diagnose(t *testing.T, f *fleet.Fleet, s *postgres.Store, mode map[string]string) {
	ctx := context.Background()
	for id := range mode {
		m, rev, err := f.Runner().Load(ctx, id)
		if err != nil {
			t.Logf("%s: %v", id, err)
			continue
		}
		h := m.History()
		if len(h) > 0 && h[len(h)-1].Text() == "all done" {
			continue
		}
		var roles []string
		for _, msg := range h {
			roles = append(roles, string(msg.Role)+":"+msg.Text())
		}
		var inbox int
		s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.inbox WHERE machine_id = $1`), id).Scan(&inbox)
		rows, _ := s.Pool().Query(ctx, side(`SELECT kind, state, attempt, errors::text FROM {s}.river_job WHERE args->>'machine_id' = $1 ORDER BY id`), id)
		var jobs []string
		for rows.Next() {
			var kind, state string
			var attempt int
			var errs *string
			rows.Scan(&kind, &state, &attempt, &errs)
			e := ""
			if errs != nil {
				e = *errs
			}
			jobs = append(jobs, fmt.Sprintf("%s/%s/%d %s", kind, state, attempt, e))
		}
		rows.Close()
		t.Logf("%s (%s) rev %d pending %d inbox %d history %q jobs %q", id, mode[id], rev, len(m.Pending()), inbox, roles, jobs)
	}
}

// TestConcurrentResumes: of 50 concurrent resumes of one suspension, one
// is accepted and the others fail with instance.ErrAlreadyResolved; the
// resume handler runs once.
func TestConcurrentResumes(t *testing.T) {
	f, s := startFleet(t)
	ctx := context.Background()
	id := parkOne(t, f, "race")

	errs := testkit.Race(50, func(i int) error {
		_, err := f.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: fmt.Sprintf("approved %d", i)})
		return err
	})
	require.Equal(t, 1, acceptedOf(t, errs))
	require.Eventually(t, func() bool {
		m, _, err := f.Runner().Load(ctx, "race")
		require.NoError(t, err)
		h := m.History()
		return h[len(h)-1].Text() == "all done"
	}, 30*time.Second, 20*time.Millisecond)
	var runs int
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.handler_runs`)).Scan(&runs))
	require.Equal(t, 1, runs, "the resume handler runs once")
}

// startFleet opens a fleet in a schema of its own, with the side tables
// of the charter's tools, and starts it; both end with the test.
func startFleet(t *testing.T) (*fleet.Fleet, *postgres.Store) {
	t.Helper()
	f, s, _, _ := openTestFleet(t)
	ctx := context.Background()
	require.NoError(t, f.Start(ctx))
	t.Cleanup(func() { f.Stop(ctx) })
	return f, s
}

// createSideTables creates the tables the charter's tools record in.
func createSideTables(ctx context.Context, s *postgres.Store) error {
	_, err := s.Pool().Exec(ctx, side(`CREATE TABLE {s}.executions (key text NOT NULL, pid int NOT NULL);
		CREATE TABLE {s}.made_effects (key text PRIMARY KEY);
		CREATE TABLE {s}.handler_runs (suspend_id text NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`))
	return err
}

// parkOne creates machine id and runs it until its ask tool suspends, and
// returns the suspend ID.
func parkOne(t *testing.T, f *fleet.Fleet, id string) string {
	t.Helper()
	ctx := context.Background()
	_, err := f.Runner().Create(ctx, id, "desk", nil)
	require.NoError(t, err)
	steps, err := testkit.Collect(f.Runner().Run(ctx, id, machine.UserText("resume")))
	require.NoError(t, err)
	return steps[len(steps)-1].Suspensions[0].SuspendID
}

// answerUntilDone answers each resume/cancel suspension once, as it
// appears, and returns when every machine made its last effect.
func answerUntilDone(t *testing.T, f *fleet.Fleet, s *postgres.Store, mode map[string]string) {
	ctx := context.Background()
	answered := map[string]bool{}
	deadline := time.Now().Add(100 * time.Second)
	for {
		pending, err := f.Runner().Pending(ctx, store.Filter{})
		require.NoError(t, err)
		for _, p := range pending {
			if answered[p.ID] || mode[p.MachineID] == "expire" {
				continue
			}
			answered[p.ID] = true
			if mode[p.MachineID] == "resume" {
				_, err = f.Resume(ctx, machine.ResumeInput{SuspendID: p.ID, Payload: "approved " + p.MachineID})
			} else {
				_, err = f.Cancel(ctx, machine.CancelInput{SuspendID: p.ID, Reason: "not needed"})
			}
			require.NoError(t, err)
		}
		var finished int
		require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.made_effects WHERE key LIKE '%/after'`)).Scan(&finished))
		if finished == *machines && len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			diagnose(t, f, s, mode)
			t.Fatalf("after 100 s: %d of %d machines made their last effect, %d suspensions pending", finished, *machines, len(pending))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMachine checks that machine id finished, its suspension resolved
// once the way md says.
func checkMachine(t *testing.T, f *fleet.Fleet, id, md string) {
	ctx := context.Background()
	var m *machine.Machine
	require.Eventually(t, func() bool {
		var err error
		m, _, err = f.Runner().Load(ctx, id)
		require.NoError(t, err)
		h := m.History()
		return h[len(h)-1].Text() == "all done"
	}, 30*time.Second, 50*time.Millisecond, "machine %s ends with the final answer", id)
	var results []string
	uses := 0
	for _, msg := range m.History() {
		uses += len(msg.ToolUses())
		for _, p := range msg.Parts {
			if p.SuspendID != "" && p.Kind == message.KindToolResult {
				results = append(results, p.Text)
			}
		}
	}
	require.Equal(t, 3, uses, "machine %s: three tool calls", id)
	require.Len(t, results, 1, "machine %s: one result for its suspension", id)
	switch md {
	case "resume":
		require.Equal(t, "approved "+id, results[0])
	case "cancel":
		require.Contains(t, results[0], "cancelled")
	case "expire":
		require.Contains(t, results[0], "expired")
	}
	index, err := f.Runner().Pending(ctx, store.Filter{MachineID: id, Status: map[string]store.Status{
		"resume": store.StatusResolved, "cancel": store.StatusCancelled, "expire": store.StatusExpired}[md]})
	require.NoError(t, err)
	require.Len(t, index, 1, "machine %s: the index records how its suspension ended", id)
}
