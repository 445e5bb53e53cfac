package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// journalEnv, set, makes the effect tool make a journaled effect too
// (node.Effect "made"), recorded in the side table journaled.
const journalEnv = "FLEET_JOURNAL"

// sideExec runs sql on the side tables (see retry).
func sideExec(ctx context.Context, sql string, args ...any) error {
	return retry(ctx, func() error {
		_, err := sideEffects.pool.Exec(ctx, side(sql), args...)
		return err
	})
}

// retry calls fn again while it fails and ctx lasts: the chaos test
// restarts the server under the tools, which see it as latency.
func retry(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond): // the server is restarting
		}
	}
}

// withTimeout is a context that ends after d (its resources are freed
// then).
func withTimeout(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	time.AfterFunc(d, cancel)
	return ctx
}

// journaledEffect makes the effect tool's journaled effect: a row of
// journaled under the effect's journal key, which its reconcile hook
// looks for.
func journaledEffect(ctx *node.ToolContext[desk]) (string, error) {
	key := ctx.IdempotencyKey() + "/made"
	return node.Effect(ctx, "made", func(ctx context.Context) (string, error) {
		return "made", sideExec(ctx, `INSERT INTO {s}.journaled (key, pid) VALUES ($1, $2)`, key, os.Getpid())
	}, node.EffectConfig[string]{Reconcile: func(ctx context.Context, key string) (string, bool, error) {
		found, err := journaledRow(ctx, key)
		return "made", found, err
	}})
}

// journaledRow reports whether the journaled effect of key was made
// (see retry).
func journaledRow(ctx context.Context, key string) (found bool, err error) {
	err = retry(ctx, func() error {
		return sideEffects.pool.QueryRow(ctx, side(`SELECT EXISTS (SELECT 1 FROM {s}.journaled WHERE key = $1)`), key).Scan(&found)
	})
	return found, err
}

// TestChaos drives machines as TestFleet does, with a journaled effect in
// each effect call, on a PostgreSQL cluster of its own, while SIGKILLing
// worker processes at random moments and restarting the server
// (pg_ctl restart) twice mid-run: every machine finishes with each
// suspension resolved once, the way it was meant to; no journaled effect
// is made twice; the resumes per second are reported.
func TestChaos(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	url := cluster.URL
	schema := pgtest.Schema(t, url)
	t.Setenv(journalEnv, "1")
	ctx := context.Background()
	f, s, err := openFleet(ctx, url, schema)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, createSideTables(ctx, s))
	_, err = s.Pool().Exec(ctx, side(`CREATE TABLE {s}.journaled (key text NOT NULL, pid int NOT NULL)`))
	require.NoError(t, err)

	n := min(*machines, 60)
	procs := make([]*exec.Cmd, *workers)
	for i := range procs {
		procs[i], err = startWorker(url, schema)
		require.NoError(t, err)
	}
	var procsMu sync.Mutex
	defer func() {
		procsMu.Lock()
		defer procsMu.Unlock()
		for _, p := range procs {
			stopWorker(p)
		}
	}()

	start := time.Now()
	mode := sendModes(t, f, n)

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	kills, restarts := 0, 0
	chaos.Go(func() {
		for kills < 6 {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(300+rand.IntN(700)) * time.Millisecond):
			}
			procsMu.Lock()
			i := rand.IntN(len(procs))
			procs[i].Process.Kill()
			procs[i].Wait()
			kills++
			// While the server restarts a worker cannot open: start
			// it again until it does.
			var p *exec.Cmd
			err := retry(withTimeout(30*time.Second), func() (err error) {
				p, err = startWorker(url, schema)
				return err
			})
			if err != nil {
				procsMu.Unlock()
				t.Error(err)
				return
			}
			procs[i] = p
			procsMu.Unlock()
		}
	})
	chaos.Go(func() {
		for restarts < 2 {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(1000+rand.IntN(1500)) * time.Millisecond):
			}
			if err := cluster.Restart(); err != nil {
				t.Error(err)
				return
			}
			restarts++
		}
	})

	answerThroughChaos(t, f, s, mode)
	elapsed := time.Since(start)
	close(stop)
	chaos.Wait()

	for id, md := range mode {
		checkMachine(t, f, id, md)
	}
	var effects, executions, made, twice, resumed int
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.made_effects`)).Scan(&effects))
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.executions`)).Scan(&executions))
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(DISTINCT key), count(*) - count(DISTINCT key) FROM {s}.journaled`)).Scan(&made, &twice))
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(DISTINCT suspend_id) FROM {s}.handler_runs`)).Scan(&resumed))
	require.Equal(t, 2*n, effects, "one completed effect per idempotency key")
	require.Equal(t, 2*n, made, "every journaled effect made")
	require.Zero(t, twice, "journaled effects made twice")
	require.Equal(t, n/3+boolInt(n%3 > 0), resumed, "every resumed suspension ran its handler")
	t.Logf("%d machines, %d worker processes, %d SIGKILLs, %d server restarts: all finished in %v, %.1f resumes/s; %d tool executions for %d keys, %d journaled effects, none twice",
		n, *workers, kills, restarts, elapsed.Round(time.Millisecond), float64(resumed)/elapsed.Seconds(), executions, effects, made)
}

// answerThroughChaos answers each resume/cancel suspension once, as it
// appears, and decides each effect in doubt from the side table (made:
// done; not made: retry), until every machine made its last effect.
// Errors while the server restarts are retried.
func answerThroughChaos(t *testing.T, f *fleet.Fleet, s *postgres.Store, mode map[string]string) {
	ctx := context.Background()
	answered := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		finished, pending, err := answerOnce(ctx, f, s, mode, answered)
		if err == nil && finished == len(mode) && pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			diagnose(t, f, s, mode)
			t.Fatalf("after 3 min: %d of %d machines made their last effect, %d suspensions pending (last error: %v)", finished, len(mode), pending, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the machines' progress
	}
}

// answerOnce answers what is pending now and reports how many machines
// made their last effect.
func answerOnce(ctx context.Context, f *fleet.Fleet, s *postgres.Store, mode map[string]string, answered map[string]bool) (finished, pending int, err error) {
	list, err := f.Runner().Pending(ctx, store.Filter{})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range list {
		if answered[p.ID] || (mode[p.MachineID] == "expire" && p.Name != "effect") {
			continue
		}
		var in error
		switch {
		case p.Name == "effect":
			in = decideInDoubt(ctx, f, p)
		case mode[p.MachineID] == "resume":
			_, in = f.Resume(ctx, machine.ResumeInput{SuspendID: p.ID, Payload: "approved " + p.MachineID})
		default:
			_, in = f.Cancel(ctx, machine.CancelInput{SuspendID: p.ID, Reason: "not needed"})
		}
		if in != nil && !errors.Is(in, instance.ErrAlreadyResolved) {
			err = errors.Join(err, in)
			continue
		}
		answered[p.ID] = true
	}
	if qerr := s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.made_effects WHERE key LIKE '%/after'`)).Scan(&finished); qerr != nil {
		return 0, len(list), errors.Join(err, qerr)
	}
	return finished, len(list), err
}

// decideInDoubt decides the journaled effect in doubt of suspension p from
// the side table: done if its row is there, retry if not.
func decideInDoubt(ctx context.Context, f *fleet.Fleet, p store.Suspension) error {
	call, err := f.Runner().Call(ctx, p.ID)
	if err != nil {
		return err
	}
	d, ok := instance.InDoubtOf(call.Metadata)
	if !ok {
		return fmt.Errorf("suspension %s of the effect tool is not in doubt: %s", p.ID, call.Reason)
	}
	found, err := journaledRow(ctx, d.Key)
	if err != nil {
		return err
	}
	dec := instance.InDoubtDecision{Decision: "retry"}
	if found {
		dec = instance.InDoubtDecision{Decision: "done", Result: []byte(`"made"`)}
	}
	_, err = f.Resume(ctx, machine.ResumeInput{SuspendID: p.ID, Payload: dec, By: "chaos"})
	return err
}
