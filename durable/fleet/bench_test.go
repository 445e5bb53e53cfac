package fleet_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// accepters is how many goroutines of the benchmark's process accept
// resumes at once in the burst, so that acceptance keeps the workers busy.
const accepters = 16

// benchLatency is the model's latency in the benchmark (issue 28's shape).
const benchLatency = "50ms"

// BenchmarkFleetResumes measures resumes through a fleet of 1, 2 and 4
// worker processes (children of the test binary) on one PostgreSQL, with
// a 50 ms model. 2 × b.N machines are parked on their ask tool; each
// resume is accepted through Fleet.Resume, and its run then calls the
// ask tool's resume handler, the model, the effect tool and the model
// again. It reports:
//
//   - resumes/s: the peak, b.N resumes accepted at once (from accepters
//     goroutines) until every resumed machine has finished (its run job
//     completed, as told by a NOTIFY from a trigger on River's job table);
//   - then b.N resumes accepted one at a time at half that rate, each on
//     a goroutine of its own (an open loop), and of those:
//     accept-p50-ms and accept-p99-ms, how long Fleet.Resume took to
//     return; pickup-p50-ms and pickup-p99-ms, from its return to the
//     first line of the resume handler on a worker (the handler records
//     clock_timestamp() in a side table: one host, one clock);
//   - peak-accept-p50-ms and peak-accept-p99-ms, Fleet.Resume's time in
//     the burst.
//
// Run it with -benchtime=300x or so (a fixed count: every b.N starts its
// workers and parks its machines again).
func BenchmarkFleetResumes(b *testing.B) {
	url := pgtest.URL(b)
	b.Setenv(latencyEnv, benchLatency)
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) { benchResumes(b, url, n) })
	}
}

func benchResumes(b *testing.B, url string, workers int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	schema := pgtest.Schema(b, url)
	f, s, err := openFleet(ctx, url, schema)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := createSideTables(ctx, s); err != nil {
		b.Fatal(err)
	}
	done, err := listenDone(ctx, url, schema)
	if err != nil {
		b.Fatal(err)
	}
	defer done.Close(context.Background())
	for range workers {
		p, err := startWorker(url, schema)
		if err != nil {
			b.Fatal(err)
		}
		defer stopWorker(p)
	}

	// Park 2 × b.N machines: each makes its first effect and suspends on
	// ask. The first b.N are the burst's, the others the paced run's.
	ids := make([]string, 2*b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%06d", i)
		if _, err := f.Runner().Create(ctx, ids[i], "desk", nil); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Send(ctx, ids[i], machine.UserText("resume")); err != nil {
			b.Fatal(err)
		}
	}
	if err := waitDone(ctx, done, ids); err != nil {
		b.Fatal(err)
	}
	pending, err := f.Runner().Pending(ctx, store.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	if len(pending) != len(ids) {
		b.Fatalf("%d machines parked, want %d", len(pending), len(ids))
	}
	slices.SortFunc(pending, func(x, y store.Suspension) int { return strings.Compare(x.MachineID, y.MachineID) })
	burst, paced := pending[:b.N], pending[b.N:]

	b.ResetTimer()
	start := time.Now()
	peakAccept, err := acceptAll(ctx, f, burst)
	if err != nil {
		b.Fatal(err)
	}
	if err := waitDone(ctx, done, ids[:b.N]); err != nil {
		b.Fatal(err)
	}
	peak := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()

	accepted, acceptTook, err := acceptPaced(ctx, f, paced, peak/2)
	if err != nil {
		b.Fatal(err)
	}
	if err := waitDone(ctx, done, ids[b.N:]); err != nil {
		b.Fatal(err)
	}
	pickup, err := pickups(ctx, paced, accepted)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(peak, "resumes/s")
	b.ReportMetric(quantile(peakAccept, 0.5), "peak-accept-p50-ms")
	b.ReportMetric(quantile(peakAccept, 0.99), "peak-accept-p99-ms")
	b.ReportMetric(quantile(acceptTook, 0.5), "accept-p50-ms")
	b.ReportMetric(quantile(acceptTook, 0.99), "accept-p99-ms")
	b.ReportMetric(quantile(pickup, 0.5), "pickup-p50-ms")
	b.ReportMetric(quantile(pickup, 0.99), "pickup-p99-ms")
}

// acceptAll resumes every suspension through f, from accepters
// goroutines, and returns how long each Resume took, in milliseconds.
func acceptAll(ctx context.Context, f *fleet.Fleet, pending []store.Suspension) ([]float64, error) {
	took := make([]float64, len(pending))
	errs := make([]error, accepters)
	var wg sync.WaitGroup
	for g := range accepters {
		wg.Go(func() {
			for i := g; i < len(pending) && errs[g] == nil; i += accepters {
				t := time.Now()
				_, errs[g] = f.Resume(ctx, machine.ResumeInput{SuspendID: pending[i].ID, Payload: "approved"})
				took[i] = ms(time.Since(t))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return took, nil
}

// acceptPaced resumes every suspension through f at rate per second, each
// on a goroutine of its own started on time whatever the earlier ones
// take, and returns when each Resume returned and how long it took.
func acceptPaced(ctx context.Context, f *fleet.Fleet, pending []store.Suspension, rate float64) ([]time.Time, []float64, error) {
	accepted := make([]time.Time, len(pending))
	took := make([]float64, len(pending))
	errs := make([]error, len(pending))
	every := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range pending {
		// Pacing the arrivals (an open loop), not waiting for anything.
		time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		wg.Go(func() {
			t := time.Now()
			_, errs[i] = f.Resume(ctx, machine.ResumeInput{SuspendID: p.ID, Payload: "approved"})
			accepted[i] = time.Now()
			took[i] = ms(accepted[i].Sub(t))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return accepted, took, nil
}

// pickups returns, in milliseconds, how long after accepted[i] the resume
// handler of pending[i] first ran, as it recorded in handler_runs.
func pickups(ctx context.Context, pending []store.Suspension, accepted []time.Time) ([]float64, error) {
	rows, err := sideEffects.pool.Query(ctx, side(`SELECT suspend_id, min(at) FROM {s}.handler_runs GROUP BY suspend_id`))
	if err != nil {
		return nil, err
	}
	first := map[string]time.Time{}
	var id string
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error { first[id] = at; return nil }); err != nil {
		return nil, err
	}
	out := make([]float64, len(pending))
	for i, p := range pending {
		at, ok := first[p.ID]
		if !ok {
			return nil, fmt.Errorf("no handler run for %s", p.ID)
		}
		out[i] = ms(at.Sub(accepted[i]))
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// quantile is the q-quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// listenDone makes every completion of a run job in schema NOTIFY the
// channel schema_done with its machine's ID, and returns a connection
// LISTENing on it.
func listenDone(ctx context.Context, url, schema string) (*pgx.Conn, error) {
	channel := pgx.Identifier{schema + "_done"}.Sanitize()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, side(`CREATE FUNCTION {s}.notify_done() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_notify('`+schema+`_done', NEW.args->>'machine_id'); RETURN NULL; END $$;
		CREATE TRIGGER notify_done AFTER UPDATE ON {s}.river_job FOR EACH ROW
		WHEN (NEW.state = 'completed' AND OLD.state <> 'completed' AND NEW.kind = 'markov_run')
		EXECUTE FUNCTION {s}.notify_done();
		LISTEN `+channel)); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// waitDone waits until the run job of every machine of ids completed once.
func waitDone(ctx context.Context, conn *pgx.Conn, ids []string) error {
	left := make(map[string]bool, len(ids))
	for _, id := range ids {
		left[id] = true
	}
	for len(left) > 0 {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("%d machines not done: %w", len(left), err)
		}
		delete(left, n.Payload)
	}
	return nil
}

// stopWorker stops a worker process with SIGTERM and waits for it.
func stopWorker(p *exec.Cmd) {
	p.Process.Signal(syscall.SIGTERM)
	p.Wait()
}
