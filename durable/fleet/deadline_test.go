package fleet_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// hangEnv, set in a worker process, makes the ask tool's resume handler
// wait until the suspension's deadline has passed on the database's clock,
// record its run, say so (NOTIFY schema_hung) and hang until the process
// is killed: a worker that dies after a resume handler ran, past the
// deadline, before the save that records it.
const hangEnv = "FLEET_HANG_HANDLER"

func hang(ctx *node.ToolContext[desk], suspendID string) (string, error) {
	if _, err := sideEffects.pool.Exec(ctx, side(`SELECT pg_sleep(greatest(0, extract(epoch FROM deadline - clock_timestamp())) + 0.05)
		FROM {s}.suspensions WHERE id = $1`), suspendID); err != nil {
		return "", err
	}
	if _, err := sideEffects.pool.Exec(ctx, side(`INSERT INTO {s}.handler_runs (suspend_id, pid) VALUES ($1, $2)`), suspendID, os.Getpid()); err != nil {
		return "", err
	}
	if _, err := sideEffects.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, sideEffects.schema+"_hung", suspendID); err != nil {
		return "", err
	}
	<-ctx.Done()
	return "", ctx.Err()
}

// listen returns a connection LISTENing on channel.
func listen(t *testing.T, url, channel string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	return conn
}

// untilPast waits until the database's clock has passed suspension id's
// deadline: the scenario needs the deadline behind it.
func untilPast(t *testing.T, f *fleet.Fleet, id string) {
	t.Helper()
	_, err := f.Runner().Suspension(context.Background(), id)
	require.NoError(t, err)
	_, err = sideEffects.pool.Exec(context.Background(), side(`SELECT pg_sleep(greatest(0, extract(epoch FROM deadline - clock_timestamp())) + 0.01)
		FROM {s}.suspensions WHERE id = $1`), id)
	require.NoError(t, err)
}

// parkWith creates machine id and runs it until its ask tool suspends
// with a deadline timeout from now, and returns the suspend ID.
func parkWith(t *testing.T, f *fleet.Fleet, id string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	_, err := f.Runner().Create(ctx, id, "desk", nil)
	require.NoError(t, err)
	steps, err := collectSteps(f, id, machine.UserText("timeout "+strconv.Itoa(int(timeout.Milliseconds()))))
	require.NoError(t, err)
	return steps[len(steps)-1].Suspensions[0].SuspendID
}

func collectSteps(f *fleet.Fleet, id string, in machine.Input) ([]machine.Step, error) {
	var out []machine.Step
	for s, err := range f.Runner().Run(context.Background(), id, in) {
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// A result accepted before the deadline (on the database's clock) is
// applied though its run comes after the deadline; the deadline expires
// only the call with no accepted result, and a result offered after it is
// refused with machine.ErrDeadlinePassed, accepting nothing.
func TestAcceptedBeforeDeadlineIsApplied(t *testing.T) {
	f, s, _, _ := openTestFleet(t)
	ctx := context.Background()
	late := parkWith(t, f, "late", 400*time.Millisecond)
	missed := parkWith(t, f, "missed", 400*time.Millisecond)
	a, err := f.Resume(ctx, machine.ResumeInput{SuspendID: late, Payload: "approved late"})
	require.NoError(t, err)
	untilPast(t, f, late)
	untilPast(t, f, missed)
	_, err = f.Resume(ctx, machine.ResumeInput{SuspendID: missed, Payload: "approved missed"})
	require.ErrorIs(t, err, machine.ErrDeadlinePassed)
	var queued int
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*) FROM {s}.inbox WHERE machine_id = 'missed'`)).Scan(&queued))
	require.Zero(t, queued, "nothing accepted past the deadline")

	// The workers start after both deadlines.
	require.NoError(t, f.Start(ctx))
	t.Cleanup(func() { f.Stop(ctx) })
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = f.Await(wctx, a)
	require.NoError(t, err, "the accepted resume's run ends")
	checkMachine(t, f, "late", "resume")
	checkMachine(t, f, "missed", "expire")
}

// TestKilledAfterHandlerPastDeadline is issue 28's: a worker process is
// SIGKILLed right after it ran a resume handler and before its save, past
// the suspension's deadline (far shorter than River's rescue, a minute
// and a 30 s tick). Every resume is applied, each handler's run repeats at
// most once, and each machine continues on another worker within 5 s of
// the kill.
func TestKilledAfterHandlerPastDeadline(t *testing.T) {
	const n = 6 // at most the dying worker's River workers, so all hang at once
	f, s, url, schema := openTestFleet(t)
	ctx := context.Background()
	hung := listen(t, url, schema+"_hung")
	ran := listen(t, url, schema+"_handler")
	done, err := listenDone(ctx, url, schema)
	require.NoError(t, err)
	t.Cleanup(func() { done.Close(context.Background()) })

	dying := testkit.ChildCommand("FLEET_WORKER=1", "FLEET_URL="+url, "FLEET_SCHEMA="+schema, hangEnv+"=1")
	require.NoError(t, testkit.StartChild(dying, "ready"))
	defer func() { dying.Process.Kill(); dying.Wait() }()

	ids := make([]string, n)
	mode := map[string]string{}
	for i := range ids {
		ids[i] = fmt.Sprintf("k%d", i)
		mode[ids[i]] = "resume"
		sus := parkWith(t, f, ids[i], 2*time.Second)
		_, err := f.Resume(ctx, machine.ResumeInput{SuspendID: sus, Payload: "approved " + ids[i]})
		require.NoError(t, err)
	}
	// Every handler ran in the dying worker, past its deadline.
	for range n {
		_, err := hung.WaitForNotification(ctx)
		require.NoError(t, err)
	}
	survivor, err := startWorker(url, schema)
	require.NoError(t, err)
	defer stopWorker(survivor)
	killed := time.Now()
	require.NoError(t, dying.Process.Kill())
	dying.Wait()

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var lat []time.Duration
	for range n {
		_, err := ran.WaitForNotification(wctx)
		require.NoError(t, err, "the survivor ran %d of %d handlers", len(lat), n)
		lat = append(lat, time.Since(killed))
	}
	require.NoError(t, waitDone(wctx, done, ids))
	slices.Sort(lat)
	t.Logf("from SIGKILL to the handler's run in another worker, %d machines: min %v, median %v, max %v", n, lat[0], lat[n/2], lat[n-1])
	require.LessOrEqual(t, lat[n-1], 5*time.Second, "every machine continued within 5 s of the kill")

	for _, id := range ids {
		checkMachine(t, f, id, "resume")
	}
	var runs, most int
	require.NoError(t, s.Pool().QueryRow(ctx, side(`SELECT count(*), max(c) FROM (SELECT count(*) AS c FROM {s}.handler_runs GROUP BY suspend_id) r`)).Scan(&runs, &most))
	require.Equal(t, n, runs, "every suspension's handler ran")
	require.Equal(t, 2, most, "a handler's run repeats at most once: in the dead worker, then in the survivor")
	pending, err := f.Runner().Pending(ctx, store.Filter{Status: store.StatusExpired})
	require.NoError(t, err)
	require.Empty(t, pending, "no suspension expired")
}
