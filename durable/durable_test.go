package durable_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

type desk struct {
	Done int `json:"done"`
}

type empty struct{}

// workRounds is how many work calls the scripted agent makes before it
// asks for approval, and again after.
const workRounds = 3

// agentModel is deterministic from the transcript alone, so a machine
// restarted in another process gets the same replies: workRounds calls to
// work, one to ask, workRounds more, then a final answer. Tool-use IDs
// derive from the transcript length, so they never repeat.
func agentModel(latency time.Duration) llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		results := 0
		for _, m := range req.Messages {
			if m.Role == message.Tool {
				results++
			}
		}
		id := fmt.Sprintf("t%d", len(req.Messages))
		r := scripted.Reply{Latency: latency}
		switch {
		case results == workRounds:
			r.Calls = []scripted.Call{{ID: id, Name: "ask", Input: empty{}}}
		case results <= 2*workRounds:
			r.Calls = []scripted.Call{{ID: id, Name: "work", Input: empty{}}}
		default:
			r.Text = "all done"
		}
		return r, nil
	})
}

// resumeHandlerRuns counts the runs of the ask tool's resume handler in
// this process.
var resumeHandlerRuns atomic.Int64

func newCharter(t testing.TB, model llm.Model) *machine.Charter {
	t.Helper()
	c, err := buildCharter(model)
	require.NoError(t, err)
	return c
}

// buildCharter builds the test charter around model; edits change its
// configuration first (telemetry providers, say).
func buildCharter(model llm.Model, edits ...func(*machine.CharterConfig)) (*machine.Charter, error) {
	ask := node.NewTool("ask", "ask for approval", func(ctx *node.ToolContext[desk], _ empty) (string, error) {
		return "", ctx.Suspend("approval", instance.WithTimeout(time.Hour))
	}, node.OnResume(func(_ *node.ToolContext[desk], _ empty, r node.Resumed[json.RawMessage]) (string, error) {
		resumeHandlerRuns.Add(1)
		return instance.Decode[string](r.Payload)
	}))
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{workTool(), ask}})
	if err != nil {
		return nil, err
	}
	cfg := machine.CharterConfig{Model: model, Nodes: []*node.Node{n}}
	for _, edit := range edits {
		edit(&cfg)
	}
	return machine.NewCharter(cfg)
}

// workTool is the desk's tool work: it counts one unit of work done.
func workTool() node.Tool[desk] {
	return node.NewTool("work", "do a unit of work", func(ctx *node.ToolContext[desk], _ empty) (int, error) {
		err := ctx.Update(func(d *desk) { d.Done++ })
		return ctx.State().Done, err
	})
}

// stores returns the stores every durable test runs against.
func stores(t *testing.T) map[string]func(t *testing.T) store.Store {
	out := map[string]func(t *testing.T) store.Store{
		"memstore": func(t *testing.T) store.Store { return memstore.New() },
		"sqlite": func(t *testing.T) store.Store {
			return sqlitetest.Open(t, sqlitetest.Path(t))
		},
	}
	if os.Getenv(pgtest.EnvVar) != "" {
		out["postgres"] = func(t *testing.T) store.Store {
			s, _, _ := pgtest.Open(t)
			return s
		}
	}
	return out
}

// forEachStore runs test as a subtest on a fresh store of each kind
// stores returns.
func forEachStore(t *testing.T, test func(t *testing.T, s store.Store)) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) { test(t, open(t)) })
	}
}

func newRunner(t testing.TB, s store.Store, model llm.Model) *durable.Runner {
	t.Helper()
	r, err := durable.New(durable.Config{Store: s, Charter: newCharter(t, model)})
	require.NoError(t, err)
	return r
}

// drain runs a sequence to its end.
var drain = testkit.Collect[machine.Step]

// suspended creates a machine and runs it until it asks for approval.
func suspended(t testing.TB, r *durable.Runner, id string) string {
	t.Helper()
	ctx := context.Background()
	_, err := r.Create(ctx, id, "desk", nil)
	require.NoError(t, err)
	steps, err := drain(r.Run(ctx, id, machine.UserText("go")))
	require.NoError(t, err)
	last := steps[len(steps)-1]
	require.True(t, last.NeedsResume())
	return last.Suspensions[0].SuspendID
}

// checkHistory asserts that history has no duplicated or lost messages:
// one user message, tool uses answered once each in order, at most one
// final answer.
func checkHistory(t testing.TB, h []message.Message) (toolRounds int, finished bool) {
	t.Helper()
	require.NotEmpty(t, h)
	require.Equal(t, "go", h[0].Text())
	seen := map[string]bool{}
	for i := 1; i < len(h); i++ {
		msg := h[i]
		switch msg.Role {
		case message.Assistant:
			require.False(t, finished, "nothing after the final answer")
			uses := msg.ToolUses()
			if len(uses) == 0 {
				require.Equal(t, "all done", msg.Text())
				finished = true
				continue
			}
			require.Len(t, uses, 1)
			require.False(t, seen[uses[0].ID], "tool use %s duplicated", uses[0].ID)
			seen[uses[0].ID] = true
			require.Less(t, i+1, len(h), "tool use without result")
			res := h[i+1]
			require.Equal(t, message.Tool, res.Role)
			require.Equal(t, uses[0].ID, res.Parts[0].ID)
			toolRounds++
			i++
		default:
			t.Fatalf("unexpected message %d: %+v", i, msg)
		}
	}
	return toolRounds, finished
}

func TestRunSuspendResumeAcrossRunners(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		first := newRunner(t, s, agentModel(0))
		id := suspended(t, first, "m1")
		pending, err := first.Pending(ctx, store.Filter{})
		require.NoError(t, err)
		require.Len(t, pending, 1)
		require.Equal(t, id, pending[0].ID)
		require.Equal(t, "m1", pending[0].MachineID)
		require.Equal(t, "ask", pending[0].Name)

		// A second runner with a fresh charter: another process.
		second := newRunner(t, s, agentModel(0))
		steps, err := runSteps(second.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"}))
		require.NoError(t, err)
		require.Equal(t, machine.EndTurn, steps[len(steps)-1].Reason)
		m, _, err := second.Load(ctx, "m1")
		require.NoError(t, err)
		rounds, finished := checkHistory(t, m.History())
		require.True(t, finished)
		require.Equal(t, 2*workRounds+1, rounds)
		require.Equal(t, desk{Done: 2 * workRounds}, m.Root().State)
		pending, err = second.Pending(ctx, store.Filter{})
		require.NoError(t, err)
		require.Empty(t, pending)

		_, err = runSteps(second.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "again"}))
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
		_, err = runSteps(second.Resume(ctx, machine.ResumeInput{SuspendID: "nope", Payload: nil}))
		require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

func TestConcurrentResumeExactlyOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		id := suspended(t, newRunner(t, s, agentModel(0)), "race")
		resumeHandlerRuns.Store(0)
		runners := make([]*durable.Runner, 50)
		for i := range runners {
			runners[i] = newRunner(t, s, agentModel(0))
		}
		errs := testkit.Race(len(runners), func(i int) error {
			_, err := runSteps(runners[i].Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: fmt.Sprintf("payload %d", i)}))
			return err
		})
		wins := 0
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				winner = i
			case errors.Is(err, store.ErrConflict), errors.Is(err, instance.ErrAlreadyResolved), errors.Is(err, instance.ErrUnknownSuspendID):
			default:
				t.Errorf("racer %d: unexpected error %v", i, err)
			}
		}
		require.Equal(t, 1, wins)
		require.Equal(t, int64(1), resumeHandlerRuns.Load(), "the resume handler runs in the winner only")
		m, _, err := newRunner(t, s, agentModel(0)).Load(ctx, "race")
		require.NoError(t, err)
		checkHistory(t, m.History())
		parts := testkit.SuspendParts(m.History(), id)
		require.Len(t, parts, 1, "the resume result is in history exactly once")
		require.Equal(t, fmt.Sprintf("payload %d", winner), parts[0].Text)
	})
}

func TestSweeperExpires(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		c := expiringCharter(t, clock.Now)
		newR := func() *durable.Runner {
			r, err := durable.New(durable.Config{Store: s, Charter: c})
			require.NoError(t, err)
			return r
		}
		r := newR()
		for i := range 3 {
			suspended(t, r, fmt.Sprintf("m%d", i))
		}
		swept, err := r.Sweep(ctx, 0)
		require.NoError(t, err)
		require.Zero(t, swept, "nothing has expired yet")
		clock.Advance(2 * time.Hour)
		// Two sweepers at once never handle the same suspension twice.
		var wg sync.WaitGroup
		counts := make([]int, 2)
		for i := range counts {
			sw := newR()
			wg.Go(func() {
				n, err := sw.Sweep(ctx, 0)
				require.NoError(t, err)
				counts[i] = n
			})
		}
		wg.Wait()
		require.Equal(t, 3, counts[0]+counts[1])
		pending, err := r.Pending(ctx, store.Filter{})
		require.NoError(t, err)
		require.Empty(t, pending)
		for i := range 3 {
			m, _, err := r.Load(ctx, fmt.Sprintf("m%d", i))
			require.NoError(t, err)
			_, finished := checkHistory(t, m.History())
			require.True(t, finished)
		}
	})
}

// expiringCharter's ask suspends for an hour, then resumes itself with
// "auto-approved"; its clock is now.
func expiringCharter(t *testing.T, now func() time.Time) *machine.Charter {
	t.Helper()
	work := node.NewTool("work", "", func(ctx *node.ToolContext[desk], _ empty) (int, error) { return 0, nil })
	ask := node.NewTool("ask", "", func(ctx *node.ToolContext[desk], _ empty) (string, error) {
		return "", ctx.Suspend("approval", instance.WithTimeout(time.Hour), instance.OnTimeoutResume("auto-approved", false))
	})
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{work, ask}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: agentModel(0), Nodes: []*node.Node{n}, Clock: now})
	require.NoError(t, err)
	return c
}

// A machine that does not load is skipped by the sweep, which sweeps the
// others, and parked with its error (Runner.Parked) until its next save;
// the sweep returns its error. Each park adds a machine.parked change to
// the suspension feed, with the errors so far; each healthy machine the
// sweep finishes, a machine.finished change. On SQLite and PostgreSQL.
func TestSweepParksABrokenMachine(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sweep.db")
		s := openSQLite(t, path)
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		testSweepParks(t, s, func(tree []byte) []byte {
			var was []byte
			require.NoError(t, db.QueryRow(`SELECT tree FROM machines WHERE id = 'broken'`).Scan(&was))
			_, err := db.Exec(`UPDATE machines SET tree = ? WHERE id = 'broken'`, tree)
			require.NoError(t, err)
			return was
		})
	})
	t.Run("postgres", func(t *testing.T) {
		s, url, schema := pgtest.Open(t)
		conn, err := pgx.Connect(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(context.Background()) })
		testSweepParks(t, s, func(tree []byte) []byte {
			var was []byte
			require.NoError(t, conn.QueryRow(context.Background(), `UPDATE `+schema+`.machines m SET tree = $1 FROM `+schema+`.machines o
				WHERE m.id = 'broken' AND o.id = m.id RETURNING o.tree`, tree).Scan(&was))
			return was
		})
	})
}

// testSweepParks is TestSweepParksABrokenMachine on s, where setTree
// writes the stored tree of machine "broken" behind the store's back and
// returns the one it replaced.
func testSweepParks(t *testing.T, s store.Store, setTree func(tree []byte) []byte) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	r, err := durable.New(durable.Config{Store: s, Charter: expiringCharter(t, clock.Now), Lease: time.Minute})
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "broken", "c"} {
		suspended(t, r, id)
	}
	tree := setTree([]byte("{"))
	parked, err := r.Parked(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, parked)

	clock.Advance(2 * time.Hour)
	swept, err := r.Sweep(ctx, 0)
	require.Equal(t, 3, swept, "the healthy machines are swept")
	require.ErrorContains(t, err, "sweep machine broken")
	for _, id := range []string{"a", "b", "c"} {
		m, _, err := r.Load(ctx, id)
		require.NoError(t, err)
		_, finished := checkHistory(t, m.History())
		require.True(t, finished, id)
	}
	parked, err = r.Parked(ctx, 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, "broken", parked[0].MachineID)
	require.Equal(t, durable.KindSweep, parked[0].Kind)
	require.Equal(t, clock.Now(), parked[0].At)
	require.Len(t, parked[0].Errors, 1)
	require.Contains(t, parked[0].Errors[0], "decode machine broken")

	// Its claim lapses; the next sweep fails again and adds its error.
	clock.Advance(2 * time.Minute)
	swept, err = r.Sweep(ctx, 0)
	require.Zero(t, swept)
	require.Error(t, err)
	parked, err = r.Parked(ctx, 0)
	require.NoError(t, err)
	require.Len(t, parked[0].Errors, 2)

	changes, err := s.(store.EventLog).ReadSuspensionChanges(ctx, 0, 0)
	require.NoError(t, err)
	var finished []string
	var parks [][]string
	for _, c := range changes {
		switch m := c.Machine; {
		case m == nil:
		case m.Event == store.MachineFinished:
			finished = append(finished, c.Suspension.MachineID)
			require.Equal(t, "all done", m.Answer)
		default:
			require.Equal(t, store.MachineParked, m.Event)
			require.Equal(t, "broken", c.Suspension.MachineID)
			parks = append(parks, m.Errors)
		}
	}
	require.ElementsMatch(t, []string{"a", "b", "c"}, finished)
	require.Equal(t, [][]string{parked[0].Errors[:1], parked[0].Errors}, parks)

	// Mended, it is swept, and its save unparks it.
	setTree(tree)
	clock.Advance(2 * time.Minute)
	swept, err = r.Sweep(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, swept)
	parked, err = r.Parked(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, parked)
}

// Parked needs a store.Parker.
func TestParkedUnsupported(t *testing.T) {
	_, err := newRunner(t, memstore.New(), agentModel(0)).Parked(context.Background(), 0)
	require.ErrorIs(t, err, durable.ErrUnsupported)
}

func TestCreateConflictAndCommands(t *testing.T) {
	s := memstore.New()
	r := newRunner(t, s, agentModel(0))
	ctx := context.Background()
	_, err := r.Create(ctx, "dup", "desk", nil)
	require.NoError(t, err)
	_, err = r.Create(ctx, "dup", "desk", nil)
	require.ErrorIs(t, err, store.ErrConflict)
	_, _, err = r.Load(ctx, "missing")
	require.ErrorIs(t, err, store.ErrNotFound)
	id, err := r.Create(ctx, "", "desk", nil)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	ids, err := r.Machines(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"dup", id}, ids)
	cmds, err := r.Commands(ctx, id)
	require.NoError(t, err)
	require.Empty(t, cmds)
	require.NoError(t, r.Delete(ctx, id))
	_, _, err = r.Load(ctx, id)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	_, err := durable.New(durable.Config{Store: memstore.New()})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
	_, err = durable.New(durable.Config{})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
}

// A Run sequence ranged over twice applies its inputs once: the second
// range yields machine.ErrIterReused and the stored machine is unchanged.
func TestRunSequenceIsSingleUse(t *testing.T) {
	ctx := context.Background()
	r := newRunner(t, memstore.New(), agentModel(0))
	_, err := r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	seq := r.Run(ctx, "m1", machine.UserText("go"))
	steps, err := drain(seq)
	require.NoError(t, err)
	id := steps[len(steps)-1].Suspensions[0].SuspendID
	before, rev, err := r.Load(ctx, "m1")
	require.NoError(t, err)

	_, err = drain(seq)
	require.ErrorIs(t, err, machine.ErrIterReused)
	after, rev2, err := r.Load(ctx, "m1")
	require.NoError(t, err)
	require.Equal(t, rev, rev2)
	require.Equal(t, before.History(), after.History())

	run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: id, Payload: "approved"})
	require.NoError(t, err)
	_, err = drain(run.Steps())
	require.NoError(t, err)
	_, err = drain(run.Steps())
	require.ErrorIs(t, err, machine.ErrIterReused, "not a second resume attempt")
	for _, err := range run.Events() {
		require.ErrorIs(t, err, machine.ErrIterReused, "a Run runs once, whichever way")
	}
}

// coreStore is a store.Store without the optional capabilities.
type coreStore struct{ store.Store }

// A store with only the core interface runs, suspends and resumes
// machines; listing machines and sweeping need capabilities it lacks and
// fail with ErrUnsupported, and so does recovering the runs cut short.
func TestCoreStoreOnly(t *testing.T) {
	ctx := context.Background()
	r := newRunner(t, coreStore{memstore.New()}, agentModel(0))
	sid := suspended(t, r, "m1")
	_, err := runSteps(r.Resume(ctx, machine.ResumeInput{SuspendID: sid, Payload: "ok"}))
	require.NoError(t, err)

	_, err = r.Machines(ctx)
	require.ErrorIs(t, err, durable.ErrUnsupported)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = r.Sweep(ctx, 0)
	require.ErrorIs(t, err, durable.ErrUnsupported)
	require.ErrorIs(t, r.RunSweeper(ctx, time.Hour), durable.ErrUnsupported)
	_, err = r.Recover(ctx)
	require.ErrorIs(t, err, durable.ErrUnsupported)
}

// TestUserMessageSavedWithFirstStep checks that a run's user messages are
// saved with its first step, not before the model call: a model call that
// fails keeps nothing of them (the caller, told so, sends them again), and
// a run that gets through saves them once.
func TestUserMessageSavedWithFirstStep(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		down := errors.New("model down")
		failing := newRunner(t, s, llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) { return nil, down }))
		id, err := failing.Create(ctx, "", "desk", nil)
		require.NoError(t, err)
		_, err = drain(failing.Run(ctx, id, machine.UserText("hello")))
		require.ErrorIs(t, err, down)
		m, rev, err := failing.Load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, int64(1), rev, "the failed run saved something")
		require.Empty(t, m.History())

		r := newRunner(t, s, agentModel(0))
		_, err = drain(r.Run(ctx, id, machine.UserText("hello")))
		require.NoError(t, err)
		m, _, err = r.Load(ctx, id)
		require.NoError(t, err)
		users := 0
		for _, msg := range m.History() {
			if msg.Role == message.User {
				users++
			}
		}
		require.Equal(t, 1, users)
	})
}

// runSteps drains the run a check-in (Resume, Cancel, Invoke) returned,
// or returns the check-in's error.
func runSteps(run *durable.Run, err error) ([]machine.Step, error) {
	if err != nil {
		return nil, err
	}
	return drain(run.Steps())
}
