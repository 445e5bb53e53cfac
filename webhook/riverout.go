package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// On PostgreSQL each delivery is a River job (kind KindDelivery, queue
// Queue) in the store's schema: inserted once per delivery ID, retried by
// River with the Sender's backoff, discarded (dead) after MaxAttempts, and
// worked by whichever sending process fetches it.
const (
	// KindDelivery is the River job kind of a delivery.
	KindDelivery = "markov_webhook"
	// Queue is the River queue of the deliveries: only the processes that
	// run a Sender work it.
	Queue = "markov_webhooks"
)

// pgStore is what the River outbox needs of a PostgreSQL store
// (*postgres.Store): its pool and the schema holding River's tables.
type pgStore interface {
	Pool() *pgxpool.Pool
	Schema() string
}

// deliveryArgs are a delivery job's arguments: the delivery ID (the
// job's unique key), its subscription and the exact body to POST.
type deliveryArgs struct {
	ID           string    `json:"delivery_id" river:"unique"`
	Subscription string    `json:"subscription"`
	Type         EventType `json:"type"`
	// Body is the Event, kept as a string so that every attempt POSTs
	// the same bytes (a jsonb object would be rewritten).
	Body string `json:"body"`
}

func (deliveryArgs) Kind() string { return KindDelivery }

// everyState makes a delivery ID unique among all jobs River keeps: a
// delivery read again from the feed after a crash is not inserted twice.
var everyState = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted, rivertype.JobStateDiscarded,
	rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// riverOutbox keeps the deliveries as River jobs.
type riverOutbox struct {
	s      *Sender
	client *river.Client[pgx.Tx]
	pool   *pgxpool.Pool
	// due makes the retries that are due available, and hands the jobs of
	// dead senders (running longer than an attempt can) back: the client
	// takes no part in River's leader election, whose maintenance would
	// discard delivery jobs in processes that do not know their kind.
	due string
}

// deliveryWorker works delivery jobs.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	o *riverOutbox
}

func newRiverOutbox(s *Sender, st pgStore, timeout time.Duration) (*riverOutbox, error) {
	o := &riverOutbox{s: s, pool: st.Pool()}
	schema := pgx.Identifier{st.Schema()}.Sanitize()
	o.due = strings.NewReplacer("{s}", schema).Replace(`UPDATE {s}.river_job SET
			state = CASE WHEN state = 'running' AND attempt >= max_attempts THEN 'discarded' ELSE 'available' END::{s}.river_job_state,
			finalized_at = CASE WHEN state = 'running' AND attempt >= max_attempts THEN now() END,
			scheduled_at = least(scheduled_at, now()),
			errors = CASE WHEN state = 'running' THEN array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt,
				'error', 'the sending process stopped during the attempt', 'trace', '')) ELSE errors END
		WHERE queue = '` + Queue + `' AND (
			(state IN ('retryable', 'scheduled') AND scheduled_at <= now()) OR
			(state = 'running' AND attempted_at < now() - make_interval(secs => $1)))`)
	workers := river.NewWorkers()
	river.AddWorker(workers, &deliveryWorker{o: o})
	c, err := river.NewClient(riverpgxv5.New(o.pool), &river.Config{
		Schema:                 st.Schema(),
		Queues:                 map[string]river.QueueConfig{Queue: {MaxWorkers: 10}},
		Workers:                workers,
		LeaderElectionDisabled: true,
		FetchOnlyKnownKinds:    true,
		JobTimeout:             timeout + 5*time.Second,
		Logger:                 slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	o.client = c
	return o, nil
}

// start starts working the delivery jobs, and the loop of due retries
// and stuck jobs; the returned stop ends both and waits for the attempts
// in flight.
func (o *riverOutbox) start(ctx context.Context) (stop func(), err error) {
	if err := o.client.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("webhook: start the delivery jobs: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.maintain(lctx)
	}()
	return func() {
		cancel()
		<-done
		sctx, cancel := context.WithTimeout(context.Background(), o.s.timeout+5*time.Second)
		defer cancel()
		if err := o.client.Stop(sctx); err != nil {
			o.client.StopAndCancel(context.Background())
		}
	}, nil
}

// maintainEvery is how often a sender looks for due retries and stuck
// attempts.
const maintainEvery = 500 * time.Millisecond

// maintain runs o.due until ctx ends. A job running for two attempts'
// time (and 5 s) belongs to a process that died: an attempt is bounded
// by Timeout.
func (o *riverOutbox) maintain(ctx context.Context) {
	stuck := (2*o.s.timeout + 5*time.Second).Seconds()
	t := time.NewTicker(maintainEvery)
	defer t.Stop()
	for {
		if _, err := o.pool.Exec(ctx, o.due, stuck); err != nil && ctx.Err() == nil {
			o.s.logger.LogAttrs(ctx, slog.LevelWarn, "webhook: schedule the due deliveries", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// enqueue inserts one job per delivery; a delivery ID already inserted is
// skipped. Once inserted, a delivery is River's: the position to save is
// through.
func (o *riverOutbox) enqueue(ctx context.Context, ds []*Delivery, through int64) (int64, error) {
	params := make([]river.InsertManyParams, 0, len(ds))
	for _, d := range ds {
		params = append(params, river.InsertManyParams{
			Args: deliveryArgs{ID: d.ID, Subscription: d.Subscription, Type: d.Type, Body: string(d.Body)},
			InsertOpts: &river.InsertOpts{Queue: Queue, MaxAttempts: o.s.maxAttempts,
				UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: everyState}},
		})
	}
	if len(params) == 0 {
		return through, nil
	}
	if _, err := o.client.InsertMany(ctx, params); err != nil {
		return 0, fmt.Errorf("webhook: insert the delivery jobs: %w", err)
	}
	return through, nil
}

// Work attempts the delivery once: an error has River retry it (or
// discard it after its last attempt); an unsafe target or a 410 Gone
// cancels it at once.
func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	sub := w.o.s.subscription(job.Args.Subscription)
	if sub == nil {
		return river.JobCancel(fmt.Errorf("%w: subscription %s is no longer configured", ErrDeliveryFailed, job.Args.Subscription))
	}
	status, err := w.o.s.post(ctx, sub, job.Args.ID, []byte(job.Args.Body))
	w.o.s.logAttempt(ctx, job.Args.ID, sub.URL, job.Attempt, status, err)
	switch {
	case err == nil:
		return river.RecordOutput(ctx, status)
	case errors.Is(err, ErrUnsafeTarget) || status == http.StatusGone:
		return river.JobCancel(err)
	}
	return err
}

// NextRetry is the Sender's backoff: Backoff, doubled per attempt, up to
// MaxBackoff.
func (w *deliveryWorker) NextRetry(job *river.Job[deliveryArgs]) time.Time {
	return time.Now().Add(w.o.s.wait(job.Attempt))
}

// Timeout bounds an attempt by the Sender's (and a little more).
func (w *deliveryWorker) Timeout(*river.Job[deliveryArgs]) time.Duration {
	return w.o.s.timeout + 5*time.Second
}

// maxList caps a list of deliveries on PostgreSQL.
const maxList = 10000

// list returns the delivery jobs, newest first.
func (o *riverOutbox) list(ctx context.Context, state DeliveryState, limit int) ([]Delivery, error) {
	if limit <= 0 || limit > maxList {
		limit = maxList
	}
	p := river.NewJobListParams().Kinds(KindDelivery).OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(limit)
	if state != "" {
		p = p.States(statesOf[state]...)
	}
	res, err := o.client.JobList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("webhook: list the deliveries: %w", err)
	}
	out := make([]Delivery, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		d, err := o.deliveryOf(j)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// statesOf are the River job states of each delivery state.
var statesOf = map[DeliveryState][]rivertype.JobState{
	Pending: {rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
		rivertype.JobStateRunning, rivertype.JobStateScheduled},
	Delivered: {rivertype.JobStateCompleted},
	Dead:      {rivertype.JobStateDiscarded, rivertype.JobStateCancelled},
}

// job returns the job of delivery id.
func (o *riverOutbox) job(ctx context.Context, id string) (*rivertype.JobRow, error) {
	res, err := o.client.JobList(ctx, river.NewJobListParams().Kinds(KindDelivery).
		Where("args->>'delivery_id' = @id", river.NamedArgs{"id": id}).First(1))
	if err != nil {
		return nil, fmt.Errorf("webhook: find delivery %s: %w", id, err)
	}
	if len(res.Jobs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownDelivery, id)
	}
	return res.Jobs[0], nil
}

func (o *riverOutbox) get(ctx context.Context, id string) (Delivery, error) {
	j, err := o.job(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	return o.deliveryOf(j)
}

// redeliver makes the job available now (River adds an attempt to one
// that has used them all).
func (o *riverOutbox) redeliver(ctx context.Context, id string) (Delivery, error) {
	j, err := o.job(ctx, id)
	if err != nil {
		return Delivery{}, err
	}
	if j, err = o.client.JobRetry(ctx, j.ID); err != nil {
		return Delivery{}, fmt.Errorf("webhook: redeliver %s: %w", id, err)
	}
	return o.deliveryOf(j)
}

// deliveryOf is job j as a Delivery.
func (o *riverOutbox) deliveryOf(j *rivertype.JobRow) (Delivery, error) {
	var a deliveryArgs
	if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
		return Delivery{}, fmt.Errorf("webhook: delivery job %d: %w", j.ID, err)
	}
	d := Delivery{ID: a.ID, Subscription: a.Subscription, Type: a.Type, Attempts: j.Attempt, CreatedAt: j.CreatedAt, Body: []byte(a.Body), State: Pending}
	if sub := o.s.subscription(a.Subscription); sub != nil {
		d.URL = sub.URL
	}
	for st, js := range statesOf {
		for _, s := range js {
			if s == j.State {
				d.State = st
			}
		}
	}
	if d.State == Pending && j.State != rivertype.JobStateRunning {
		d.NextAttempt = j.ScheduledAt
	}
	if n := len(j.Errors); n > 0 && d.State != Delivered {
		d.LastError = j.Errors[n-1].Error
		d.LastStatus = statusIn(d.LastError)
	} else if d.State == Delivered {
		d.LastStatus, _ = strconv.Atoi(string(j.Output()))
	}
	return d, nil
}

// statusIn is the status an attempt's error names ("answered 503"), or 0.
func statusIn(msg string) int {
	_, after, ok := strings.Cut(msg, answered)
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(after)
	return n
}
