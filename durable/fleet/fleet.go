// Package fleet runs durable machines across many processes sharing one
// PostgreSQL database, on River (github.com/riverqueue/river).
//
// An input for a machine — a resume, a cancel, a command, a user message
// — is accepted by committing it to the machine's inbox together with the
// River job that will apply it, in one transaction: once [Fleet.Resume]
// (or Cancel, Invoke, Send) returns, the input is durable and will be
// applied, whichever process dies. The job ("markov_run", unique per
// machine among jobs not yet finished) is worked by any process that runs
// [Fleet.Start]:
//
//   - it holds the machine (durable.Runner.TryHold: a PostgreSQL advisory
//     lock, released if the process dies), so at most one process runs a
//     machine at any moment; a job that finds the machine held elsewhere
//     snoozes;
//   - it applies the inbox in order, one input per run, marking each
//     input with the revision whose save applies it before it runs, so an
//     input is applied once even if the worker dies at any point;
//   - it completes in a transaction that re-checks the inbox under the
//     machine's inbox lock, the lock every acceptance takes: an input
//     accepted while the job finishes is either seen (the job goes on) or
//     gets a job of its own.
//
// A worker that dies mid-run leaves its job running with its machine's
// lock released: another process takes it over (Config.TakeOverAfter,
// seconds) and continues the machine from its last save. Deadlines are River jobs ("markov_expire")
// scheduled at the deadline when the save that creates the suspension is
// made; they expire the suspension on the database's clock. A machine
// that fails to load or run is retried with backoff and parked after
// Config.MaxAttempts ([Fleet.Parked] lists them with their errors); other
// machines are not held up. Finished machines are deleted after
// Config.Retention by a periodic job that River's leader runs once,
// fleet-wide.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
	"github.com/markov-agents/markov/standing"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
)

// Defaults of Config.
const (
	DefaultWorkers     = 10
	DefaultRescueAfter = time.Minute
	DefaultMaxAttempts = 10
	DefaultBusySnooze  = time.Second
	// DefaultTakeOverAfter is Config.TakeOverAfter's default.
	DefaultTakeOverAfter = 2 * time.Second
	// DefaultFetchCooldown is Config.FetchCooldown's default.
	DefaultFetchCooldown = 5 * time.Millisecond
)

// Config configures a Fleet.
type Config struct {
	// Store is the shared database. Required.
	Store *postgres.Store
	// Charter is what the machines run against. Required.
	Charter *machine.Charter
	// Rules and Tenant are the fleet's standing approvals and tenant
	// label (durable.Config.Rules, durable.Config.Tenant).
	Rules  *standing.Set
	Tenant string
	// Workers is how many machines this process runs at once once
	// started (DefaultWorkers if zero).
	Workers int
	// TakeOverAfter is how long a job may be running while no session
	// holds its machine's lock before another process takes it over
	// (DefaultTakeOverAfter if zero). A worker holds the lock for the
	// whole of a job once it has fetched it, and PostgreSQL releases it
	// the moment the worker's process dies (its session ends): a dead
	// worker's machines continue elsewhere about TakeOverAfter after the
	// job started, or at most 1.5 × TakeOverAfter after the death. Every
	// started process looks every TakeOverAfter / 2.
	TakeOverAfter time.Duration
	// RescueAfter is how long a run may go without finishing before
	// River's rescuer (every 30 s) hands its job to another process,
	// which waits for the machine's lock: a live run keeps it
	// (DefaultRescueAfter if zero). TakeOverAfter acts first on the jobs
	// of dead workers; RescueAfter is the backstop.
	RescueAfter time.Duration
	// MaxAttempts is how many times a failing machine is tried, with
	// backoff, before it is parked (DefaultMaxAttempts if zero).
	MaxAttempts int
	// Retention, if positive, deletes machines with nothing pending whose
	// last save is older than it, checked every RetentionEvery (an hour
	// if zero).
	Retention, RetentionEvery time.Duration
	// FetchCooldown is the least time between two fetches of jobs by this
	// process, and between two of its notifications that it inserted some
	// (River's FetchCooldown; DefaultFetchCooldown if zero). An accepted
	// input waits for up to about twice it before a worker fetches its
	// job: River's default, 100 ms, made the median resume wait 50 ms.
	FetchCooldown time.Duration
	// BusySnooze is how long a job waits before trying again a machine
	// another process is running (DefaultBusySnooze if zero).
	BusySnooze time.Duration
	// Logger receives what the fleet does (silent if nil).
	Logger *slog.Logger
}

// Fleet accepts inputs for machines and, once started, works them.
type Fleet struct {
	cfg    Config
	runner *durable.Runner
	client *river.Client[pgx.Tx]
	log    *slog.Logger
	q      queries
	// stopTakeOver ends the take-over loop Start began, and waits for it.
	stopTakeOver func()
}

// Job kinds.
const (
	kindRun       = "markov_run"
	kindExpire    = "markov_expire"
	kindRetention = "markov_retention"
)

type runArgs struct {
	MachineID string `json:"machine_id"`
}

func (runArgs) Kind() string { return kindRun }

type expireArgs struct {
	MachineID string `json:"machine_id"`
	SuspendID string `json:"suspend_id"`
}

func (expireArgs) Kind() string { return kindExpire }

type retentionArgs struct{}

func (retentionArgs) Kind() string { return kindRetention }

// New returns a Fleet on cfg.Store. It works no job until Start.
func New(cfg Config) (*Fleet, error) {
	if cfg.Store == nil || cfg.Charter == nil {
		return nil, fmt.Errorf("%w: a Store and a Charter are required", ErrInvalidConfig)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = DefaultRescueAfter
	}
	if cfg.TakeOverAfter <= 0 {
		cfg.TakeOverAfter = DefaultTakeOverAfter
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.FetchCooldown <= 0 {
		cfg.FetchCooldown = DefaultFetchCooldown
	}
	if cfg.BusySnooze <= 0 {
		cfg.BusySnooze = DefaultBusySnooze
	}
	if cfg.RetentionEvery <= 0 {
		cfg.RetentionEvery = time.Hour
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, q: newQueries(cfg.Store.Schema())}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	r, err := durable.New(durable.Config{Store: cfg.Store, Charter: cfg.Charter, Logger: cfg.Logger, BeforeSave: f.scheduleDeadlines, ExternalDeadlines: true,
		Rules: cfg.Rules, Tenant: cfg.Tenant})
	if err != nil {
		return nil, err
	}
	f.runner = r
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(f.workRun))
	river.AddWorker(workers, river.WorkFunc(f.workExpire))
	river.AddWorker(workers, river.WorkFunc(f.workRetention))
	rc := &river.Config{
		Schema:  cfg.Store.Schema(),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers: workers,
		// River rescues no job whose timeout is infinite; the workers
		// ignore this one (runRunning), so only a job that ran longer than
		// RescueAfter is handed over, and then finds its machine held.
		JobTimeout:           cfg.RescueAfter,
		RescueStuckJobsAfter: cfg.RescueAfter,
		MaxAttempts:          cfg.MaxAttempts,
		FetchCooldown:        cfg.FetchCooldown,
		Logger:               slog.New(slog.DiscardHandler),
	}
	if cfg.Logger != nil {
		rc.Logger = cfg.Logger
	}
	if cfg.Retention > 0 {
		rc.PeriodicJobs = []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(cfg.RetentionEvery),
			func() (river.JobArgs, *river.InsertOpts) { return retentionArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true})}
	}
	f.client, err = river.NewClient(riverpgxv5.New(cfg.Store.Pool()), rc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return f, nil
}

// Runner is the durable.Runner of the fleet: its runs hold the machine
// fleet-wide and schedule the deadlines they create, so it may be used
// directly (Create, Load, a synchronous Run) beside the fleet's jobs.
func (f *Fleet) Runner() *durable.Runner { return f.runner }

// Start begins working jobs in this process, and schedules the deadlines
// of pending suspensions that have no job yet (suspensions made before
// the fleet). Stop it with Stop.
func (f *Fleet) Start(ctx context.Context) error {
	if err := f.client.Start(ctx); err != nil {
		return fmt.Errorf("fleet: start: %w", err)
	}
	if f.stopTakeOver == nil {
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.takeOverLoop(lctx)
		}()
		f.stopTakeOver = func() { cancel(); <-done }
	}
	pending, err := f.runner.Pending(ctx, store.Filter{})
	if err != nil {
		return fmt.Errorf("fleet: start: %w", err)
	}
	byMachine := map[string][]store.Suspension{}
	for _, s := range pending {
		byMachine[s.MachineID] = append(byMachine[s.MachineID], s)
	}
	for id, ss := range byMachine {
		if err := f.scheduleDeadlines(ctx, id, ss); err != nil {
			return fmt.Errorf("fleet: start: %w", err)
		}
	}
	return nil
}

// Stop stops taking jobs and waits for the running ones to finish; when
// ctx ends first, it cancels them (their jobs are retried elsewhere, and
// their machines continue from the last save) and returns ctx's error.
func (f *Fleet) Stop(ctx context.Context) error {
	if f.stopTakeOver != nil {
		f.stopTakeOver()
		f.stopTakeOver = nil
	}
	err := f.client.Stop(ctx)
	if err != nil && ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		f.client.StopAndCancel(cctx)
	}
	return err
}

// scheduleDeadlines inserts one expire job per suspension with a deadline
// or a reminder, scheduled at the earlier (store.Suspension.Due), unique
// per suspension: a job whose save then fails finds nothing to expire.
func (f *Fleet) scheduleDeadlines(ctx context.Context, machineID string, added []store.Suspension) error {
	var params []river.InsertManyParams
	for _, s := range added {
		if s.Due().IsZero() {
			continue
		}
		params = append(params, river.InsertManyParams{
			Args:       expireArgs{MachineID: machineID, SuspendID: s.ID},
			InsertOpts: &river.InsertOpts{ScheduledAt: s.Due(), UniqueOpts: river.UniqueOpts{ByArgs: true}},
		})
	}
	if len(params) == 0 {
		return nil
	}
	if _, err := f.client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("schedule deadlines: %w", err)
	}
	return nil
}

// Input kinds in the inbox.
const (
	inResume  = "resume"
	inCancel  = "cancel"
	inCommand = "command"
	inMessage = "message"
	inSignal  = "signal"
)

// entry is an inbox row's body.
type entry struct {
	SuspendID  string          `json:"suspend_id,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Command    string          `json:"command,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	InstanceID string          `json:"instance_id,omitempty"`
	Message    []byte          `json:"message,omitempty"`
	Event      string          `json:"event,omitempty"`
	FreshTurn  bool            `json:"fresh_turn,omitempty"`
	Invocation string          `json:"invocation_id,omitempty"`
	By         string          `json:"by,omitempty"`
	Groups     []string        `json:"groups,omitempty"`
	Digest     string          `json:"digest,omitempty"`
	Deny       bool            `json:"deny,omitempty"`
	Edit       json.RawMessage `json:"edit,omitempty"`
	// decider is the approver a governed decision counts for (the inbox
	// row's decider), empty for any other input; not in the body.
	decider string
}

// resume is the resume input of e.
func (e entry) resume() machine.ResumeInput {
	return machine.ResumeInput{SuspendID: e.SuspendID, Payload: entryPayload(e.Payload), IsError: e.IsError, FreshTurn: e.FreshTurn, By: e.By,
		Groups: e.Groups, Digest: e.Digest, Deny: e.Deny, Edit: entryPayload(e.Edit)}
}

// entryPayload is an entry's encoded payload as an input's: nil when there is
// none (a raw nil would be malformed JSON).
func entryPayload(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func (e entry) input(kind string) (machine.Input, error) {
	switch kind {
	case inResume:
		return e.resume(), nil
	case inCancel:
		return machine.CancelInput{SuspendID: e.SuspendID, Reason: e.Reason, By: e.By, Groups: e.Groups}, nil
	case inCommand:
		return command.Invocation{Name: e.Command, Input: e.Input, InstanceID: e.InstanceID, ID: e.Invocation}, nil
	case inMessage:
		m, err := serialize.UnmarshalMessage(e.Message)
		if err != nil {
			return nil, fmt.Errorf("%w: message: %w", ErrCorruptInbox, err)
		}
		return m, nil
	case inSignal:
		return machine.SignalInput{Event: e.Event, Payload: entryPayload(e.Payload), SuspendID: e.SuspendID}, nil
	}
	return nil, fmt.Errorf("%w: inbox entry of kind %q", ErrCorruptInbox, kind)
}

// Resume accepts the resume in: the result of suspension in.SuspendID,
// possibly with a fresh turn (FreshTurn) and who decided (By). It returns
// once the result is committed with the job that applies it. A
// suspension that is not pending, or that already has an accepted
// result, fails with instance.ErrAlreadyResolved; an unknown one with
// instance.ErrUnknownSuspendID; a payload its schema refuses with an
// *instance.PayloadError.
func (f *Fleet) Resume(ctx context.Context, in machine.ResumeInput) (durable.Accepted, error) {
	raw, err := instance.EncodePayload(in.Payload)
	if err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: resume %s: %w", in.SuspendID, err)
	}
	edit, err := instance.EncodePayload(in.Edit)
	if err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: resume %s: edit: %w", in.SuspendID, err)
	}
	return f.acceptResult(ctx, in.SuspendID, inResume, entry{SuspendID: in.SuspendID, Payload: raw, IsError: in.IsError, FreshTurn: in.FreshTurn, By: in.By,
		Groups: in.Groups, Digest: in.Digest, Deny: in.Deny, Edit: edit})
}

// AcceptResume is Resume. With AcceptCancel, AcceptInvoke and Await, it
// makes a Fleet the acceptor of a resumehttp.Handler.
func (f *Fleet) AcceptResume(ctx context.Context, in machine.ResumeInput) (durable.Accepted, error) {
	return f.Resume(ctx, in)
}

// Cancel accepts the cancellation in, as Resume accepts a result.
func (f *Fleet) Cancel(ctx context.Context, in machine.CancelInput) (durable.Accepted, error) {
	return f.acceptResult(ctx, in.SuspendID, inCancel, entry{SuspendID: in.SuspendID, Reason: in.Reason, By: in.By, Groups: in.Groups})
}

// AcceptCancel is Cancel.
func (f *Fleet) AcceptCancel(ctx context.Context, in machine.CancelInput) (durable.Accepted, error) {
	return f.Cancel(ctx, in)
}

// AcceptInvoke is Invoke.
func (f *Fleet) AcceptInvoke(ctx context.Context, machineID string, inv command.Invocation) (durable.Accepted, error) {
	return f.Invoke(ctx, machineID, inv)
}

// Await waits for the run that applies the accepted input a to end,
// whichever process runs it, and returns its steps: durable.Runner.Await
// on the fleet's runner, which follows the machine's event log. When ctx
// ends first it returns ctx's error; the run goes on.
func (f *Fleet) Await(ctx context.Context, a durable.Accepted) ([]machine.Step, error) {
	return f.runner.Await(ctx, a)
}

func (f *Fleet) acceptResult(ctx context.Context, suspendID, kind string, e entry) (durable.Accepted, error) {
	// The status is checked in accept, under the machine's inbox lock.
	sus, err := f.runner.Suspension(ctx, suspendID)
	if err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: %s %s: %w", kind, suspendID, err)
	}
	if kind == inResume {
		// A payload the run would refuse is refused now: the call's
		// schema cannot change while it is pending.
		if err := f.runner.CheckPayload(ctx, sus.MachineID, e.resume()); err != nil {
			return durable.Accepted{}, fmt.Errorf("fleet: %s %s: %w", kind, suspendID, err)
		}
		if e.decider, err = f.decider(ctx, e.resume()); err != nil {
			return durable.Accepted{}, fmt.Errorf("fleet: %s %s: %w", kind, suspendID, err)
		}
	}
	if kind == inCancel {
		in := machine.CancelInput{SuspendID: suspendID, By: e.By, Groups: e.Groups}
		if err := f.runner.CheckCancel(ctx, sus.MachineID, in); err != nil {
			return durable.Accepted{}, fmt.Errorf("fleet: %s %s: %w", kind, suspendID, err)
		}
	}
	a, err := f.accept(ctx, sus.MachineID, kind, e)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		err = fmt.Errorf("a result was already accepted: %w", instance.ErrAlreadyResolved)
	}
	if err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: %s %s: %w", kind, suspendID, err)
	}
	return a, nil
}

// Invoke accepts command inv for machine machineID. An invocation no
// machine of the charter could run (machine.Charter.CheckInvocation: a
// command no node declares, an input no declaration accepts) is refused at
// once; its target and the state are checked when it applies.
func (f *Fleet) Invoke(ctx context.Context, machineID string, inv command.Invocation) (durable.Accepted, error) {
	if err := f.cfg.Charter.CheckInvocation(inv); err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: invoke %s on %s: %w", inv.Name, machineID, err)
	}
	in, err := instance.EncodePayload(inv.Input)
	if err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: invoke %s on %s: %w", inv.Name, machineID, err)
	}
	return f.acceptFor(ctx, machineID, inCommand, entry{Command: inv.Name, Input: in, InstanceID: inv.InstanceID, Invocation: inv.ID})
}

// Send accepts user message msg for machine machineID.
func (f *Fleet) Send(ctx context.Context, machineID string, msg message.Message) (durable.Accepted, error) {
	b, err := serialize.MarshalMessage(msg)
	if err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: send to %s: %w", machineID, err)
	}
	return f.acceptFor(ctx, machineID, inMessage, entry{Message: b})
}

// acceptFor accepts an input for a machine that must exist.
func (f *Fleet) acceptFor(ctx context.Context, machineID, kind string, e entry) (durable.Accepted, error) {
	var exists bool
	if err := store.CheckID(machineID); err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: %s for %s: %w", kind, machineID, err)
	}
	if err := f.cfg.Store.Pool().QueryRow(ctx, f.q.exists, machineID).Scan(&exists); err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: %s for %s: %w", kind, machineID, err)
	}
	if !exists {
		return durable.Accepted{}, fmt.Errorf("fleet: %s for %s: %w", kind, machineID, store.ErrNotFound)
	}
	a, err := f.accept(ctx, machineID, kind, e)
	if err != nil {
		return durable.Accepted{}, fmt.Errorf("fleet: %s for %s: %w", kind, machineID, err)
	}
	return a, nil
}

// accept commits the inbox entry and the machine's run job in one
// transaction, under the machine's inbox lock.
func (f *Fleet) accept(ctx context.Context, machineID, kind string, e entry) (durable.Accepted, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return durable.Accepted{}, err
	}
	var suspendID *string
	if e.SuspendID != "" {
		suspendID = &e.SuspendID
	}
	a := durable.Accepted{MachineID: machineID, SuspendID: e.SuspendID, Command: e.Command}
	err = pgx.BeginFunc(ctx, f.cfg.Store.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, f.inboxKey(machineID)); err != nil {
			return err
		}
		if suspendID != nil {
			// Checked under the lock: a result accepted and applied since
			// has left the inbox (its row is removed after the save that
			// resolved the suspension), so the unique row cannot tell.
			// The deadline is judged here, on the database's clock, under
			// the lock the expiry's decision takes too (workExpire): a
			// result accepted before it is applied whenever its run comes.
			var st store.Status
			var deadline *time.Time
			var now time.Time
			if err := tx.QueryRow(ctx, f.q.status, *suspendID).Scan(&st, &deadline, &now); err != nil {
				return err
			}
			if st != store.StatusPending {
				return fmt.Errorf("suspension %s is %s: %w", *suspendID, st, instance.ErrAlreadyResolved)
			}
			if kind != inCancel && deadline != nil && !now.Before(*deadline) {
				return fmt.Errorf("suspension %s (deadline %s): %w", *suspendID, deadline.UTC().Format(time.RFC3339), machine.ErrDeadlinePassed)
			}
			if err := f.checkAccepted(ctx, tx, *suspendID, e); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, f.q.insert, machineID, suspendID, kind, body, e.decider).Scan(&a.InboxID); err != nil {
			return err
		}
		// The run that applies the input logs after this.
		if err := tx.QueryRow(ctx, f.q.logSeq, machineID).Scan(&a.LogSeq); err != nil {
			return err
		}
		_, err := f.client.InsertTx(ctx, tx, runArgs{MachineID: machineID}, runOpts())
		return err
	})
	return a, err
}

// decider returns the approver the decision in counts for when its call
// is governed (the inbox row's decider), empty otherwise. The decision
// was checked already (Runner.CheckPayload).
func (f *Fleet) decider(ctx context.Context, in machine.ResumeInput) (string, error) {
	call, err := f.runner.Call(ctx, in.SuspendID)
	if err != nil || call.Policy == nil {
		return "", err
	}
	return call.CheckDecision(instance.Identity{Subject: in.By, Groups: in.Groups}, in.Digest, f.cfg.Charter.Now())
}

// checkAccepted checks, under the machine's inbox lock, input e for
// suspension id against the results accepted for it and not yet applied.
// Any result but a governed decision is one per suspension
// (instance.ErrAlreadyResolved after another); the approvers of a
// governed call each have their decision accepted — a second of the same
// approver is instance.ErrAlreadyDecided — until the decisions recorded
// on the call and those accepted settle it (instance.ErrAlreadyResolved
// after); a decision after an accepted edit is instance.ErrStaleDecision,
// as it names the digest the edit changes. The call is read after the inbox, so that a decision applied
// meanwhile (saved, then its row removed) is seen in one or the other.
func (f *Fleet) checkAccepted(ctx context.Context, tx pgx.Tx, id string, e entry) error {
	rows, err := tx.Query(ctx, f.q.accepted, id)
	if err != nil {
		return err
	}
	var accepted []instance.Decision
	edited := false
	for rows.Next() {
		var d instance.Decision
		var body []byte
		var prior entry
		if err := rows.Scan(&d.By, &body); err != nil {
			rows.Close()
			return err
		}
		if d.By == "" || json.Unmarshal(body, &prior) != nil {
			rows.Close()
			return fmt.Errorf("a result was already accepted: %w", instance.ErrAlreadyResolved)
		}
		d.Deny = prior.Deny
		edited = edited || len(prior.Edit) > 0
		accepted = append(accepted, d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if edited && e.decider != "" {
		// The edit, once applied, changes the digest this decision names.
		return fmt.Errorf("an edit of the input was accepted: %w", instance.ErrStaleDecision)
	}
	if len(accepted) == 0 && e.decider == "" {
		return nil
	}
	call, err := f.runner.Call(ctx, id)
	if err != nil {
		return err
	}
	if call.Policy == nil {
		return nil
	}
	ds := slices.Clone(call.Decisions)
	for _, d := range accepted {
		if !decidedBy(ds, d.By) {
			ds = append(ds, d)
		}
	}
	if e.decider != "" && decidedBy(ds, e.decider) {
		return fmt.Errorf("%q's decision was already accepted: %w", e.decider, instance.ErrAlreadyDecided)
	}
	if call.Policy.Tally(ds) != nil {
		return fmt.Errorf("the decisions accepted settle it: %w", instance.ErrAlreadyResolved)
	}
	return nil
}

// decidedBy reports whether a decision of ds counts for principal.
func decidedBy(ds []instance.Decision, principal string) bool {
	return slices.ContainsFunc(ds, func(d instance.Decision) bool { return d.Principal() == principal })
}

// runOpts makes the run job unique per machine among unfinished jobs.
func runOpts() *river.InsertOpts {
	return &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
		rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

// inboxKey is the transaction advisory lock key of a machine's inbox.
func (f *Fleet) inboxKey(machineID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("markov/inbox:" + f.cfg.Store.Schema() + ":" + machineID))
	return int64(h.Sum64())
}

// ReplayGuard returns the replay guard of the fleet's store, shared by
// every process of the fleet: package webhook remembers delivery IDs in
// it when handed the fleet as its Acceptor.
func (f *Fleet) ReplayGuard() store.ReplayGuard { return f.runner.ReplayGuard() }
