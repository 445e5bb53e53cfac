package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// queries holds the fleet's SQL with the store's schema filled in.
type queries struct {
	exists, insert, revision, inbox, consume, remove string
	accepted                                         string
	pending, clear, expiry, retention                string
	logSeq, queued, status, stuck, takeOver          string
	due                                              string
}

func newQueries(schema string) queries {
	r := strings.NewReplacer("{s}", pgx.Identifier{schema}.Sanitize())
	return queries{
		exists:   r.Replace(`SELECT EXISTS (SELECT 1 FROM {s}.machines WHERE id = $1)`),
		insert:   r.Replace(`INSERT INTO {s}.inbox (machine_id, suspend_id, kind, body, decider) VALUES ($1, $2, $3, $4, $5) RETURNING id`),
		accepted: r.Replace(`SELECT decider, body FROM {s}.inbox WHERE suspend_id = $1 ORDER BY id`),
		revision: r.Replace(`SELECT revision FROM {s}.machines WHERE id = $1`),
		inbox:    r.Replace(`SELECT id, kind, body, consumed_rev FROM {s}.inbox WHERE machine_id = $1 ORDER BY id`),
		consume:  r.Replace(`UPDATE {s}.inbox SET consumed_rev = $2 WHERE id = $1`),
		remove:   r.Replace(`DELETE FROM {s}.inbox WHERE id = $1`),
		pending:  r.Replace(`SELECT EXISTS (SELECT 1 FROM {s}.inbox WHERE machine_id = $1)`),
		clear:    r.Replace(`DELETE FROM {s}.inbox WHERE machine_id = $1`),
		logSeq:   r.Replace(`SELECT coalesce((SELECT max(seq) FROM {s}.events WHERE machine_id = $1), (SELECT seq FROM {s}.event_floors WHERE machine_id = $1), 0)`),
		queued:   r.Replace(`SELECT count(*) FROM {s}.inbox WHERE machine_id = $1`),
		status:   r.Replace(`SELECT status, deadline, clock_timestamp() FROM {s}.suspensions WHERE id = $1`),
		// expiry is the database's clock, and whether a pending
		// suspension of the machine expired by it has an accepted input.
		expiry: r.Replace(`WITH c AS (SELECT clock_timestamp() AS now)
			SELECT c.now, EXISTS (SELECT 1 FROM {s}.inbox i JOIN {s}.suspensions s ON s.id = i.suspend_id
				WHERE i.machine_id = $1 AND s.status = 'pending' AND s.deadline <= c.now) FROM c`),
		// stuck are the run and deadline jobs running for longer than
		// $1 seconds; takeOver makes those of them named by $1 that are
		// still so available again (or discards those out of attempts),
		// recording the error $3, and wakes the workers with River's
		// insert notification on channel $4.
		stuck: r.Replace(`SELECT id, args->>'machine_id' FROM {s}.river_job
			WHERE state = 'running' AND kind IN ('` + kindRun + `', '` + kindExpire + `')
			  AND attempted_at < now() - make_interval(secs => $1)`),
		// due makes the run and deadline jobs whose time has come
		// (snoozed, or retried) available, as River's scheduler does on
		// its leader's tick; every process does it, so a leader's death
		// (its term outlives it by River's lease, about 15 s) stops no
		// machine.
		due: r.Replace(`WITH t AS (
				UPDATE {s}.river_job SET state = 'available'
				WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= now()
				  AND kind IN ('` + kindRun + `', '` + kindExpire + `')
				RETURNING 1
			), n AS (
				SELECT pg_notify($1, '{"queue": "` + river.QueueDefault + `"}') WHERE EXISTS (SELECT 1 FROM t)
			)
			SELECT count(*) FROM t, (SELECT count(*) FROM n) AS w`),
		takeOver: r.Replace(`WITH t AS (
				UPDATE {s}.river_job SET
					state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'available' END::{s}.river_job_state,
					finalized_at = CASE WHEN attempt >= max_attempts THEN now() END,
					scheduled_at = now(),
					errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', $3::text, 'trace', ''))
				WHERE id = ANY($1) AND state = 'running' AND attempted_at < now() - make_interval(secs => $2)
				RETURNING state
			), n AS (
				SELECT pg_notify($4, '{"queue": "` + river.QueueDefault + `"}') WHERE EXISTS (SELECT 1 FROM t WHERE state = 'available')
			)
			SELECT count(*) FROM t, (SELECT count(*) FROM n) AS w`),
		// logSeq is the log's end, the ID's floor when the log is empty;
		// retention deletes as store.Delete does: the machines' entries of
		// the suspension feed and the effect journal go too, and the last sequence number of each
		// log it deletes becomes its ID's floor (store.EventLog: sequence
		// numbers never repeat for an ID).
		retention: r.Replace(`WITH d AS (
				DELETE FROM {s}.machines m
				WHERE m.updated_at < now() - make_interval(secs => $1)
				  AND NOT EXISTS (SELECT 1 FROM {s}.suspensions s WHERE s.machine_id = m.id AND s.status = 'pending')
				  AND NOT EXISTS (SELECT 1 FROM {s}.inbox i WHERE i.machine_id = m.id)
				RETURNING m.id
			), sf AS (
				DELETE FROM {s}.suspension_feed WHERE machine_id IN (SELECT id FROM d)
			), ef AS (
				DELETE FROM {s}.effects WHERE machine_id IN (SELECT id FROM d)
			), l AS (
				INSERT INTO {s}.event_floors AS f (machine_id, seq)
				SELECT e.machine_id, max(e.seq) FROM {s}.events e WHERE e.machine_id IN (SELECT id FROM d) GROUP BY e.machine_id
				ON CONFLICT (machine_id) DO UPDATE SET seq = greatest(f.seq, EXCLUDED.seq)
			)
			SELECT count(*) FROM d`),
	}
}

// workRun applies a machine's inbox under its hold, then completes the
// job if the inbox is empty, or goes on.
func (f *Fleet) workRun(ctx context.Context, job *river.Job[runArgs]) error {
	ctx, cancel := undeadlined(ctx)
	defer cancel()
	id := job.Args.MachineID
	h, ok, err := f.runner.TryHold(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return river.JobSnooze(f.cfg.BusySnooze)
	}
	defer h.Release()
	ran := false
	for {
		applied, err := f.applyInbox(ctx, h)
		if err == nil && applied == 0 && !ran {
			// Nothing to apply: continue what a run that died left.
			_, err = drain(h.Run(ctx))
		}
		if errors.Is(err, store.ErrNotFound) {
			f.log.LogAttrs(ctx, slog.LevelWarn, "inbox of a deleted machine dropped", slog.String("machine", id))
			_, err = f.cfg.Store.Pool().Exec(ctx, f.q.clear, id)
		}
		if err != nil {
			return err
		}
		ran = true
		if done, err := f.complete(ctx, job); err != nil || done {
			return err
		}
	}
}

// inboxRow is an entry of a machine's inbox.
type inboxRow struct {
	id       int64
	kind     string
	body     []byte
	consumed *int64
}

// applyInbox applies the machine's inbox in order, one input per run, and
// returns how many inputs were applied. Before an input runs, its row
// records the revision whose save applies it: a row whose revision the
// machine has reached was applied (by this or a dead process) and is
// removed; one that the machine rejects is removed and logged.
func (f *Fleet) applyInbox(ctx context.Context, h *durable.Hold) (int, error) {
	id := h.MachineID()
	rev, err := f.revision(ctx, id)
	if err != nil {
		return 0, err
	}
	rows, err := f.cfg.Store.Pool().Query(ctx, f.q.inbox, id)
	if err != nil {
		return 0, err
	}
	inbox, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (inboxRow, error) {
		var x inboxRow
		err := r.Scan(&x.id, &x.kind, &x.body, &x.consumed)
		return x, err
	})
	if err != nil {
		return 0, err
	}
	applied := 0
	for _, r := range inbox {
		next, err := f.applyRow(ctx, h, r, rev)
		if next != rev {
			applied++
			rev = next
		}
		if err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// applyRow applies one inbox row to the machine at revision rev and
// removes it, unless the run failed for a reason other than the input. It
// returns the machine's revision after.
func (f *Fleet) applyRow(ctx context.Context, h *durable.Hold, r inboxRow, rev int64) (int64, error) {
	id, pool := h.MachineID(), f.cfg.Store.Pool()
	remove := func() error {
		_, err := pool.Exec(ctx, f.q.remove, r.id)
		return err
	}
	if r.consumed != nil && *r.consumed <= rev {
		return rev, remove()
	}
	var e entry
	in, err := decodeEntry(r.kind, r.body, &e)
	if err != nil {
		f.log.LogAttrs(ctx, slog.LevelError, "inbox entry dropped", slog.String("machine", id), slog.String("error", err.Error()))
		return rev, remove()
	}
	if _, err := pool.Exec(ctx, f.q.consume, r.id, rev+1); err != nil {
		return rev, err
	}
	_, runErr := drain(h.Run(ctx, in))
	next, err := f.revision(ctx, id)
	if err != nil {
		return rev, err
	}
	rejected := next == rev && errors.Is(runErr, durable.ErrRejected) && ctx.Err() == nil
	if next == rev && runErr != nil && !rejected {
		return rev, runErr
	}
	if rejected {
		f.log.LogAttrs(ctx, slog.LevelWarn, "input rejected", slog.String("machine", id), slog.String("kind", r.kind), slog.String("error", runErr.Error()))
		runErr = nil
	}
	if err := remove(); err != nil {
		return next, err
	}
	// Applied, then the run failed: a retry continues it.
	return next, runErr
}

func decodeEntry(kind string, body []byte, e *entry) (machine.Input, error) {
	if err := json.Unmarshal(body, e); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptInbox, err)
	}
	return e.input(kind)
}

func (f *Fleet) revision(ctx context.Context, id string) (int64, error) {
	var rev int64
	err := f.cfg.Store.Pool().QueryRow(ctx, f.q.revision, id).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("machine %s: %w", id, store.ErrNotFound)
	}
	return rev, err
}

// complete completes the job if the machine's inbox is empty, in a
// transaction under the inbox lock that every acceptance takes: an input
// accepted meanwhile is either seen here (done is false: go on) or
// accepted after the job completed, with a job of its own.
func (f *Fleet) complete(ctx context.Context, job *river.Job[runArgs]) (done bool, err error) {
	err = pgx.BeginFunc(ctx, f.cfg.Store.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, f.inboxKey(job.Args.MachineID)); err != nil {
			return err
		}
		var more bool
		if err := tx.QueryRow(ctx, f.q.pending, job.Args.MachineID).Scan(&more); err != nil || more {
			return err
		}
		if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
			return err
		}
		done = true
		return nil
	})
	return done, err
}

// workExpire expires a suspension whose deadline passed on the database's
// clock. A result accepted for it and not yet applied goes first.
func (f *Fleet) workExpire(ctx context.Context, job *river.Job[expireArgs]) error {
	ctx, cancel := undeadlined(ctx)
	defer cancel()
	sus, err := f.runner.Suspension(ctx, job.Args.SuspendID)
	if errors.Is(err, store.ErrNotFound) || err == nil && sus.Status != store.StatusPending {
		if job.Attempt > 1 {
			// An earlier attempt may have expired it and died before the
			// machine ran on: a run job continues it.
			_, err = f.client.Insert(ctx, runArgs{MachineID: job.Args.MachineID}, runOpts())
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	now, accepted, err := f.expiry(ctx, sus.MachineID)
	if err != nil {
		return err
	}
	switch {
	case accepted:
		return river.JobSnooze(f.cfg.BusySnooze)
	case sus.Due().After(now):
		return river.JobSnooze(sus.Due().Sub(now))
	}
	h, ok, err := f.runner.TryHold(ctx, sus.MachineID)
	if err != nil {
		return err
	}
	if !ok {
		return river.JobSnooze(f.cfg.BusySnooze)
	}
	defer h.Release()
	if _, err = drain(h.Expire(ctx, now)); err != nil {
		return err
	}
	// An escalation (instance.Escalation) leaves the call pending with a
	// later deadline, and a reminder (instance.Policy.Remind) with the
	// next reminder or the deadline to come: this job waits for it.
	if sus, err = f.runner.Suspension(ctx, job.Args.SuspendID); err == nil && sus.Status == store.StatusPending && sus.Due().After(now) {
		return river.JobSnooze(sus.Due().Sub(now))
	}
	return nil
}

// expiry reads the database's clock under the machine's inbox lock, and
// whether an input was accepted for a suspension of the machine expired by
// it. None was: then none can be any more (acceptance judges the deadline
// under the same lock, on the same clock), and every suspension expired
// by now may be expired.
func (f *Fleet) expiry(ctx context.Context, machineID string) (now time.Time, accepted bool, err error) {
	err = pgx.BeginFunc(ctx, f.cfg.Store.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, f.inboxKey(machineID)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, f.q.expiry, machineID).Scan(&now, &accepted)
	})
	return now, accepted, err
}

// workRetention deletes the machines that have nothing pending and were
// last saved more than Config.Retention ago.
func (f *Fleet) workRetention(ctx context.Context, _ *river.Job[retentionArgs]) error {
	var n int64
	if err := f.cfg.Store.Pool().QueryRow(ctx, f.q.retention, f.cfg.Retention.Seconds()).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		f.log.LogAttrs(ctx, slog.LevelInfo, "retention deleted finished machines", slog.Int64("count", n))
	}
	return nil
}

// Parked lists the parked machines, most recently parked first (at most
// limit; limit ≤ 0: 100).
func (f *Fleet) Parked(ctx context.Context, limit int) ([]durable.Parked, error) {
	if limit <= 0 {
		limit = 100
	}
	res, err := f.client.JobList(ctx, river.NewJobListParams().Kinds(kindRun, kindExpire).
		States(rivertype.JobStateDiscarded).OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderDesc).First(limit))
	if err != nil {
		return nil, fmt.Errorf("fleet: parked: %w", err)
	}
	out := make([]durable.Parked, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		w := work(j)
		out = append(out, durable.Parked{MachineID: w.MachineID, Job: w.Job, Kind: w.Kind, Errors: w.Errors, At: w.At})
	}
	return out, nil
}

// Status is durable.Runner.Status with what the fleet knows: the inputs
// accepted and not applied yet (Queued), and whether the machine is
// parked — its latest job given up after its last attempt, with the
// attempts' errors — when no run holds it.
func (f *Fleet) Status(ctx context.Context, id string) (durable.Status, error) {
	st, err := f.runner.Status(ctx, id)
	if err != nil {
		return st, err
	}
	if err := f.cfg.Store.Pool().QueryRow(ctx, f.q.queued, id).Scan(&st.Queued); err != nil {
		return st, fmt.Errorf("fleet: status of %s: %w", id, err)
	}
	res, err := f.client.JobList(ctx, river.NewJobListParams().Kinds(kindRun, kindExpire).
		Where("args->>'machine_id' = @machine", river.NamedArgs{"machine": id}).
		OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(1))
	if err != nil {
		return st, fmt.Errorf("fleet: status of %s: %w", id, err)
	}
	if len(res.Jobs) == 1 && res.Jobs[0].State == rivertype.JobStateDiscarded && st.State != durable.StateRunning {
		st.State, st.Errors = durable.StateParked, work(res.Jobs[0]).Errors
	}
	return st, nil
}

// drain runs a sequence to its end and returns its last step.
func drain(seq iter.Seq2[machine.Step, error]) (machine.Step, error) {
	var last machine.Step
	for s, err := range seq {
		if err != nil {
			return last, err
		}
		last = s
	}
	return last, nil
}

// undeadlined returns a context that River's job timeout does not end (a
// run takes as long as its model calls take) but that is cancelled when
// River cancels the job (Stop's timeout, StopAndCancel).
func undeadlined(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return out, func() { stop(); cancel() }
}
