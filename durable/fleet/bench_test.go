package fleet_test

import (
	"context"
	"fmt"
	"os/exec"
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
// resumes at once, so that acceptance keeps the workers busy.
const accepters = 4

// BenchmarkFleetResumes measures durable resumes per second through a
// fleet of 1, 2 and 4 worker processes (children of the test binary) on
// one PostgreSQL, with a zero-latency model. b.N machines are parked on
// their ask tool; the timed part accepts one resume for each through
// Fleet.Resume and ends when every resumed machine has finished (its run
// job completed: the resume handler, one more effect round and the final
// answer, each saved), as told by a NOTIFY from a trigger on River's job
// table.
func BenchmarkFleetResumes(b *testing.B) {
	url := pgtest.URL(b)
	b.Setenv(latencyEnv, "0s")
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) { benchResumes(b, url, n) })
	}
}

func benchResumes(b *testing.B, url string, workers int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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

	// Park b.N machines: each makes its first effect and suspends on ask.
	ids := make([]string, b.N)
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
	if len(pending) != b.N {
		b.Fatalf("%d machines parked, want %d", len(pending), b.N)
	}

	b.ResetTimer()
	start := time.Now()
	if err := acceptAll(ctx, f, pending); err != nil {
		b.Fatal(err)
	}
	if err := waitDone(ctx, done, ids); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "resumes/s")
}

// acceptAll resumes every suspension through f, from accepters goroutines.
func acceptAll(ctx context.Context, f *fleet.Fleet, pending []store.Suspension) error {
	errs := make([]error, accepters)
	var wg sync.WaitGroup
	for g := range accepters {
		wg.Go(func() {
			for i := g; i < len(pending) && errs[g] == nil; i += accepters {
				_, errs[g] = f.Resume(ctx, machine.ResumeInput{SuspendID: pending[i].ID, Payload: "approved"})
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
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
