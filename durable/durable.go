// Package durable runs machines that outlive their process: it loads a
// machine from a store, runs it, and saves every step — with a
// compare-and-swap revision — before yielding it. A suspension is found
// again by its suspend ID from any process and resumed exactly once, even
// when several processes race; a sweeper resolves expired suspensions by
// their on-timeout action, safely from several processes at once.
//
// Every run happens under the machine's [Hold], a per-machine lock —
// fleet-wide when the store is a [Locker] — so handler code (resume
// handlers, tools, commands) runs only in the process that holds the
// machine, after it loaded the latest save.
package durable

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
	"github.com/markov-agents/markov/standing"
	"github.com/markov-agents/markov/store"
)

// ResolvedKept is how many resolved suspensions of a machine stay in the
// store's index, so a late resume of one gets instance.ErrAlreadyResolved
// rather than instance.ErrUnknownSuspendID.
const ResolvedKept = 64

// DefaultLease is how long a sweeper's claim on an expired suspension lasts
// when Config.Lease is zero.
const DefaultLease = time.Minute

// Config configures a Runner.
type Config struct {
	// Store keeps the machines. Required. Runner.Machines needs it to be a
	// store.MachineLister too, and Sweep a store.ExpiryClaimer (otherwise
	// they fail with ErrUnsupported); every store of this module is both.
	Store store.Store
	// Charter is what the machines run against. Required.
	Charter *machine.Charter
	// Lease bounds a sweeper's claim on an expired suspension
	// (DefaultLease if zero).
	Lease time.Duration
	// Logger receives what the runner does (silent if nil).
	Logger *slog.Logger
	// BeforeSave, if set, is called before a save that adds suspensions
	// to the index as pending, with those suspensions; an error aborts the
	// save. A coordinator schedules their deadlines with it (package fleet
	// inserts one River job per deadline): a save that fails afterwards
	// leaves a job that finds nothing to do, and no deadline is ever
	// missed.
	BeforeSave func(ctx context.Context, machineID string, added []store.Suspension) error
	// ExternalDeadlines leaves every deadline to Hold.Expire: the
	// runner's runs neither expire a suspension whose deadline passed on
	// the charter's clock nor refuse a result for one
	// (machine.Machine.SetExpiry off). A coordinator that judges deadlines
	// on one clock sets it: package fleet accepts a result only before
	// the deadline on the database's clock, applies it whenever its run
	// comes, and expires a call with no accepted result from a job that
	// runs at the deadline.
	ExternalDeadlines bool
	// MeterProvider records the runner's OpenTelemetry metrics: the
	// latency of saves (markov.durable.save.duration) and the pending
	// suspensions of the store's index, an observable gauge
	// (markov.suspensions.pending) that lists them at every collection.
	// The global provider if nil. The charter's MeterProvider records the
	// machines' own metrics.
	MeterProvider metric.MeterProvider
	// HistoryCache is the byte budget of the runner's cache of decoded
	// histories (DefaultHistoryCache if zero; negative: no cache). With
	// a store that is a store.TailLoader, a run keeps the history of its
	// machine decoded, as saved, and the next run of the machine in this
	// runner reads the tree and only the history entries saved since —
	// by this runner or any other, in any process — rather than the
	// whole history: its load costs what was appended since, not the
	// length of the history. The cache is checked against the store at
	// every load (the machine's incarnation and history length), so a
	// run never starts from a stale history. The budget counts the
	// memory the histories kept take, estimated from their encoded size
	// and message count; least recently run machines are dropped first.
	HistoryCache int64
	// AuditKey, when set, signs every entry the runner appends to its
	// store's audit log (store.AuditLog): decisions on suspensions, in the
	// save that applies them, and refusals (ed25519 over the entry).
	// `markov audit verify` checks the signatures with the public key.
	AuditKey ed25519.PrivateKey
	// Retry, when its Attempts are set, tries a run in the background
	// that failed again, with backoff (see [Retry]); by default such a
	// machine waits, idle, for its next input or [Runner.Recover].
	Retry Retry
	// Rules are standing approvals (package standing): a tool or command
	// call one matches is decided at once with its payload, in the step
	// that suspends it — no save holds it pending, so it never reaches an
	// inbox — by "rule:" and its ID (machine.RuleBy), in the machine's
	// history, event log and the audit log. Each rule's uses are counted
	// in the store (store.RuleUses), fleet-wide.
	Rules *standing.Set
	// Tenant is the runner's tenant label, which a rule's
	// standing.Scope.Tenant matches.
	Tenant string
}

// Runner runs machines durably. It is safe for concurrent use; several
// Runners in several processes may share one store.
type Runner struct {
	store      store.Store
	charter    *machine.Charter
	lease      time.Duration
	log        *slog.Logger
	beforeSave func(ctx context.Context, machineID string, added []store.Suspension) error
	// external is Config.ExternalDeadlines.
	external bool
	local    *localLocks
	met      *telemetry.Metrics
	// bg are the runs that accepted inputs left in the background;
	// applied wakes the acceptances waiting for their machine.
	bg      backgroundRuns
	applied appliedSignals
	// histories caches the decoded histories of the machines run lately
	// (nil: none).
	histories *histories
	// auditKey is Config.AuditKey.
	auditKey ed25519.PrivateKey
	// retry is Config.Retry.
	retry Retry
	// rules and tenant are Config.Rules and Config.Tenant.
	rules  *standing.Set
	tenant string
}

// New returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Store == nil || cfg.Charter == nil {
		return nil, fmt.Errorf("%w: a Store and a Charter are required", ErrInvalidConfig)
	}
	r := &Runner{store: cfg.Store, charter: cfg.Charter, lease: cfg.Lease, log: cfg.Logger, beforeSave: cfg.BeforeSave, external: cfg.ExternalDeadlines, local: localLocksOf(cfg.Store), auditKey: cfg.AuditKey,
		retry: cfg.Retry, rules: cfg.Rules, tenant: cfg.Tenant}
	if err := checkRules(cfg); err != nil {
		return nil, err
	}
	if _, ok := cfg.Store.(store.TailLoader); ok {
		r.histories = newHistories(cfg.HistoryCache)
	}
	if r.lease <= 0 {
		r.lease = DefaultLease
	}
	if err := r.instrument(cfg.MeterProvider); err != nil {
		return nil, err
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Create stores a new machine whose root runs rootNode with state (nil: the
// node's initial state) under id (empty: a random ID) and returns the ID.
// An ID already in use fails with store.ErrConflict.
func (r *Runner) Create(ctx context.Context, id, rootNode string, state any) (string, error) {
	m, err := r.charter.NewMachine(rootNode, state)
	if err != nil {
		return "", err
	}
	if id == "" {
		id = instance.NewID("m_")
	}
	s := &session{r: r, id: id, m: m}
	if err := s.save(ctx); err != nil {
		return "", err
	}
	return id, nil
}

// Load returns the machine id and its stored revision.
func (r *Runner) Load(ctx context.Context, id string) (*machine.Machine, int64, error) {
	l, err := r.LoadAt(ctx, id)
	return l.Machine, l.Revision, err
}

// Loaded is a machine as [Runner.LoadAt] returns it, with where its
// store was at the load.
type Loaded struct {
	// Machine is the machine as stored.
	Machine *machine.Machine
	// Revision is its stored revision.
	Revision int64
	// EventSeq is the sequence number of the last entry of the machine's
	// event log at the load, read with the machine: the machine shows
	// what every event up to it did, and [Runner.Watch] from EventSeq
	// yields what happened after the load only. It is 0 when the log has
	// no entry, or the store keeps no event log (or does not report
	// store.Snapshot.EventSeq: a watch from 0 then reads the whole log).
	EventSeq int64
}

// LoadAt is Load with the position in the machine's event log that the
// loaded machine is at (Loaded.EventSeq): a caller that shows the
// machine and then follows it with Watch reads what happened since the
// load, not the whole log. An unknown machine fails with an error
// wrapping store.ErrNotFound.
func (r *Runner) LoadAt(ctx context.Context, id string) (Loaded, error) {
	s, err := r.load(ctx, id, false)
	if err != nil {
		return Loaded{}, err
	}
	return Loaded{Machine: s.m, Revision: s.rev, EventSeq: s.eventSeq}, nil
}

// Run takes the machine's [Hold] (waiting for a run elsewhere to end),
// loads machine id, applies inputs and runs it, and releases the hold
// when the sequence ends. Inputs are applied — resume handlers and
// commands run — only once the machine is held and loaded at its latest
// save, so of racers resuming one suspension exactly one runs its
// handler; the others fail with instance.ErrAlreadyResolved having run
// nothing. Every step is saved before it is yielded, with the revision it
// was loaded at: a save by a writer that does not hold the machine makes
// Run yield an error wrapping store.ErrConflict, and nothing of this run
// is kept. Breaking out of the loop leaves the store at the last yielded
// step. Inputs that are only user messages are saved with the run's first
// step (the model reply's checkpoint): a run that fails before it, in the
// model call for one, keeps nothing of them. Like machine.Run's, the sequence is single-use: ranging over it
// again yields machine.ErrIterReused once and applies nothing twice (a
// [Run] too).
func (r *Runner) Run(ctx context.Context, id string, inputs ...machine.Input) iter.Seq2[machine.Step, error] {
	return holding(ctx, r, id, func(h *Hold) iter.Seq2[machine.Step, error] { return h.Run(ctx, inputs...) })
}

// holding returns the single-use sequence of what seq yields under the
// hold of machine id, taken first (waiting for a run elsewhere to end) and
// released when the sequence ends.
func holding[T any](ctx context.Context, r *Runner, id string, seq func(*Hold) iter.Seq2[T, error]) iter.Seq2[T, error] {
	return singleUse(func(yield func(T, error) bool) {
		h, err := r.Hold(ctx, id)
		if err != nil {
			var zero T
			yield(zero, fmt.Errorf("hold machine %s: %w", id, err))
			return
		}
		defer h.Release()
		seq(h)(yield)
	})
}

// singleUse makes seq yield machine.ErrIterReused, and do nothing else,
// when ranged over a second time.
func singleUse[T any](seq iter.Seq2[T, error]) iter.Seq2[T, error] {
	var used atomic.Bool
	return func(yield func(T, error) bool) {
		if used.Swap(true) {
			var zero T
			yield(zero, machine.ErrIterReused)
			return
		}
		seq(yield)
	}
}

// Suspension returns the index entry of suspendID. An unknown ID wraps
// instance.ErrUnknownSuspendID and store.ErrNotFound.
func (r *Runner) Suspension(ctx context.Context, suspendID string) (store.Suspension, error) {
	sus, err := r.store.FindSuspension(ctx, suspendID)
	if errors.Is(err, store.ErrNotFound) {
		return sus, fmt.Errorf("suspension %s: %w: %w", suspendID, instance.ErrUnknownSuspendID, err)
	}
	return sus, err
}

// pendingEntry returns the index entry of suspendID, which must be
// pending: otherwise the error wraps instance.ErrAlreadyResolved.
func (r *Runner) pendingEntry(ctx context.Context, suspendID string) (store.Suspension, error) {
	sus, err := r.Suspension(ctx, suspendID)
	if err == nil && sus.Status != store.StatusPending {
		err = fmt.Errorf("suspension %s is %s: %w", suspendID, sus.Status, instance.ErrAlreadyResolved)
	}
	return sus, err
}

// Call returns the pending call suspendID as its machine records it: with
// its input, metadata and payload schema, which the index does not hold
// (a UI renders its approval form from them). It reads the machine's
// tree, not its history. A suspension no longer pending fails with
// instance.ErrAlreadyResolved, an unknown one with
// instance.ErrUnknownSuspendID.
func (r *Runner) Call(ctx context.Context, suspendID string) (instance.SuspendedCall, error) {
	sus, err := r.pendingEntry(ctx, suspendID)
	if err != nil {
		return instance.SuspendedCall{}, err
	}
	m, err := r.loadTree(ctx, sus.MachineID)
	if err != nil {
		return instance.SuspendedCall{}, err
	}
	for _, c := range m.Pending() {
		if c.SuspendID == suspendID {
			return c, nil
		}
	}
	return instance.SuspendedCall{}, fmt.Errorf("suspension %s: %w", suspendID, instance.ErrUnknownSuspendID)
}

// CheckPayload reports whether a run of machine machineID would accept
// the payload of resume in ([machine.Machine.CheckPayload]: a payload its
// call's schema rejects wraps instance.ErrPayloadDecode), reading the
// machine's tree only and running nothing. durable/fleet calls it when it
// accepts a resume, so that a payload the run would refuse is refused
// then, rather than dropped by the run.
//
// It checks the decision too ([machine.Machine.CheckDecision]): the
// digest it names and, under the call's policy, its identity; a refused
// decision is appended to the store's audit log.
func (r *Runner) CheckPayload(ctx context.Context, machineID string, in machine.ResumeInput) error {
	m, err := r.loadTree(ctx, machineID)
	if err != nil {
		return err
	}
	if err := m.CheckPayload(in); err != nil {
		return err
	}
	return r.checkDecision(ctx, machineID, m, in)
}

// loadTree loads machine id with its tree only, and no history, when the
// store is a store.TailLoader (the whole machine otherwise).
func (r *Runner) loadTree(ctx context.Context, id string) (*machine.Machine, error) {
	tl, ok := r.store.(store.TailLoader)
	if !ok {
		m, _, err := r.Load(ctx, id)
		return m, err
	}
	snap, err := tl.LoadTail(ctx, id, math.MaxInt)
	if err != nil {
		return nil, fmt.Errorf("load machine %s: %w", id, err)
	}
	return r.decode(id, snap, message.History{})
}

// Pending lists suspensions matching f (startup recovery: everything
// pending, by deadline). An empty f.Status selects pending ones; set it to
// list those resolved, expired or cancelled (a status outside
// store.Statuses fails with store.ErrUnknownStatus).
func (r *Runner) Pending(ctx context.Context, f store.Filter) ([]store.Suspension, error) {
	if f.Status == "" {
		f.Status = store.StatusPending
	}
	return r.store.ListSuspensions(ctx, f)
}

// CommandInfo describes a command a frontend may offer on one instance.
type CommandInfo struct {
	InstanceID  string          `json:"instance_id"`
	Node        string          `json:"node"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Commands lists the commands of every instance of machine id, tree order.
func (r *Runner) Commands(ctx context.Context, id string) ([]CommandInfo, error) {
	s, err := r.load(ctx, id, false)
	if err != nil {
		return nil, err
	}
	var out []CommandInfo
	for in := range s.m.Root().Walk() {
		n := r.charter.Node(in.Node)
		for _, d := range n.Commands() {
			out = append(out, CommandInfo{InstanceID: in.ID, Node: in.Node, Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
		}
		for _, p := range n.Packs() {
			for _, d := range p.Commands() {
				out = append(out, CommandInfo{InstanceID: in.ID, Node: in.Node, Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
			}
		}
	}
	return out, nil
}

// Machines lists the IDs of the stored machines. A store that is not a
// store.MachineLister fails with ErrUnsupported.
func (r *Runner) Machines(ctx context.Context) ([]string, error) {
	l, ok := r.store.(store.MachineLister)
	if !ok {
		return nil, fmt.Errorf("list machines: %w", ErrUnsupported)
	}
	return l.ListMachines(ctx)
}

// ReplayGuard returns the store as a store.ReplayGuard, or nil if it is
// not one. resumehttp finds it here, to refuse a replayed signed request
// in every process that shares the store.
func (r *Runner) ReplayGuard() store.ReplayGuard {
	g, _ := r.store.(store.ReplayGuard)
	return g
}

// Delete removes machine id with its history, its suspensions and its
// event log. It takes the machine's hold first, so it waits for a run of
// the machine in progress, in this process or in another one sharing a
// store that is a [Locker], to end; ctx bounds the wait. A run's saves
// therefore never land on a machine deleted and created again under the
// same ID; nor do its event sequence numbers repeat (store.EventLog), so
// a Watch open across the deletion goes on with the new machine's events.
// Holding the machine already, call [Hold.Delete] instead.
func (r *Runner) Delete(ctx context.Context, id string) error {
	h, err := r.Hold(ctx, id)
	if err != nil {
		return fmt.Errorf("delete machine %s: %w", id, err)
	}
	defer h.Release()
	return h.Delete(ctx)
}

// Sweep claims up to limit expired suspensions (limit ≤ 0: all) and runs
// their machines, which resolves each by its on-timeout action; it claims
// a suspension whose reminder is due (instance.Policy.Remind) too, and its
// run sends the reminder and leaves the call pending. Claims are
// exclusive across processes for the lease, so concurrent sweepers never
// handle the same suspension twice. Deadlines are judged on the charter's
// clock (machine.CharterConfig.Clock, time.Now by default): on SQLite, the
// clock of the host every process sharing the file runs on. It returns
// the number of suspensions swept; a machine another process saved
// meanwhile is skipped (its claim lapses and a later sweep retries it). A
// machine that fails (one that does not load) is skipped too, and the
// others are swept: it is parked when the store is a store.Parker
// ([Runner.Parked] lists it until its next save), logged, and its error
// is returned, joined with the other failures, after the sweep. A store
// that is not a store.ExpiryClaimer fails with ErrUnsupported.
func (r *Runner) Sweep(ctx context.Context, limit int) (int, error) {
	c, ok := r.store.(store.ExpiryClaimer)
	if !ok {
		return 0, fmt.Errorf("sweep: %w", ErrUnsupported)
	}
	now := r.charter.Now()
	claimed, err := c.ClaimExpired(ctx, now, limit, r.lease)
	if err != nil {
		return 0, err
	}
	done := map[string]bool{}
	swept := 0
	var failed []error
	for _, c := range claimed {
		if done[c.MachineID] {
			swept++
			continue
		}
		done[c.MachineID] = true
		switch runErr := r.drain(ctx, c.MachineID); {
		case runErr == nil:
			swept++
		case ctx.Err() != nil:
			return swept, errors.Join(append(failed, ctx.Err())...)
		case errors.Is(runErr, store.ErrConflict) || errors.Is(runErr, store.ErrNotFound):
			r.log.LogAttrs(ctx, slog.LevelInfo, "sweep skipped", slog.String("machine", c.MachineID), slog.String("error", runErr.Error()))
		default:
			failed = append(failed, fmt.Errorf("sweep machine %s: %w", c.MachineID, runErr))
			r.park(ctx, c.MachineID, runErr, now)
		}
	}
	return swept, errors.Join(failed...)
}

// park records that a sweep of machine id failed with err, when the store
// is a store.Parker, and logs it.
func (r *Runner) park(ctx context.Context, id string, err error, at time.Time) {
	attrs := []slog.Attr{slog.String("machine", id), slog.String("error", err.Error())}
	if p, ok := r.store.(store.Parker); ok {
		if perr := p.Park(ctx, id, err.Error(), at); perr != nil {
			attrs = append(attrs, slog.String("park_error", perr.Error()))
		}
	}
	r.log.LogAttrs(ctx, slog.LevelError, "sweep failed on a machine: parked, the others are swept", attrs...)
}

// Parked lists the machines a sweep could not run since their last save
// (see Sweep), most recently parked first (at most limit; limit ≤ 0: 100),
// each with the errors of its failed sweeps. A store that is not a
// store.Parker fails with ErrUnsupported; a fleet lists its own
// (durable/fleet.Fleet.Parked).
func (r *Runner) Parked(ctx context.Context, limit int) ([]Parked, error) {
	p, ok := r.store.(store.Parker)
	if !ok {
		return nil, fmt.Errorf("parked: %w", ErrUnsupported)
	}
	if limit <= 0 {
		limit = 100
	}
	list, err := p.ListParked(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Parked, len(list))
	for i, m := range list {
		out[i] = Parked{MachineID: m.MachineID, Kind: KindSweep, Errors: m.Errors, At: m.At}
	}
	return out, nil
}

// KindSweep is the Kind of a machine a sweep parked ([Runner.Parked]).
const KindSweep = "sweep"

// RunSweeper sweeps every interval until ctx is done, logging failures. It
// returns ctx.Err(), or ErrUnsupported at once if the store is not a
// store.ExpiryClaimer.
func (r *Runner) RunSweeper(ctx context.Context, interval time.Duration) error {
	if _, ok := r.store.(store.ExpiryClaimer); !ok {
		return fmt.Errorf("run sweeper: %w", ErrUnsupported)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := r.Sweep(ctx, 0)
		if n > 0 {
			r.log.LogAttrs(ctx, slog.LevelInfo, "swept expired suspensions", slog.Int("count", n))
		}
		if err != nil {
			r.log.LogAttrs(ctx, slog.LevelError, "sweep failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// session is one loaded machine with the revision and history length it
// was loaded (or last saved) at.
type session struct {
	r   *Runner
	id  string
	m   *machine.Machine
	rev int64
	// from is the position in the stored history of the first message
	// the machine holds: 0, unless the run loaded the end of a long
	// history only (loadEnd).
	from  int
	saved int // history messages the machine holds already in the store
	// incarnation is the machine's store.Snapshot.Incarnation, and
	// savedSize the heldSize of its saved history; with held set (a
	// run under the machine's hold, loaded through a store.TailLoader),
	// every save caches the history in the runner's histories.
	incarnation int64
	savedSize   int64
	held        bool
	// updatedAt is when the loaded revision was saved.
	updatedAt time.Time
	// eventSeq is the sequence number of the last entry of the
	// machine's event log at the load (store.Snapshot.EventSeq); saves
	// do not move it.
	eventSeq int64
	// indexed is the machine's suspension index as last loaded or saved:
	// entries that leave pending stay in it with their final status, so a
	// late resume finds them and fails with ErrAlreadyResolved rather than
	// ErrUnknownSuspendID.
	indexed []store.Suspension
	// outcomes records how suspensions left pending in this session, by
	// suspend ID: from the inputs (resume, cancel) and the steps' events.
	outcomes map[string]store.Status
	// parked are the caller suspensions applied since the last step
	// yielded, which the next one reports.
	parked []instance.SuspendedCall
	// journal is the machine's effect journal (nil: the store keeps
	// none); a save records the outcomes it holds.
	journal *journal
	// rules is the machine's decider when the runner has standing rules.
	rules *decider
	// rec collects the events of the next save (nil when the store keeps
	// no event log, or outside a run).
	rec *recorder
	// requests is false when the store, a store.RequestReporter, saw no
	// suspend request kept for the machine at the last load or save: the
	// run's next step boundary has none to read.
	requests bool
}

// finished reports whether the machine, with nothing pending, is done —
// no leaf with work left, a history (Status's StateDone) — and then its
// last answer.
func (s *session) finished() (done bool, answer string) {
	access.MachineView(s.m, func(root *instance.Instance, h message.History) {
		if done = !hasWork(root) && s.from+h.Len() > 0; done {
			answer = lastText(h.Messages())
		}
	})
	return done, answer
}

// eventStatus is the index status of each resolution event.
var eventStatus = map[instance.EventType]store.Status{
	instance.EventResumed:   store.StatusResolved,
	instance.EventExpired:   store.StatusExpired,
	instance.EventCancelled: store.StatusCancelled,
}

// note records the outcome of a suspension that leaves pending.
func (s *session) note(suspendID string, st store.Status) {
	if s.outcomes == nil {
		s.outcomes = map[string]store.Status{}
	}
	s.outcomes[suspendID] = st
}

// noteInputs records what the resumes and cancellations among inputs will
// do to their suspensions.
func (s *session) noteInputs(inputs []machine.Input) {
	for _, in := range inputs {
		switch v := in.(type) {
		case machine.ResumeInput:
			s.note(v.SuspendID, store.StatusResolved)
		case machine.CancelInput:
			s.note(v.SuspendID, store.StatusCancelled)
		}
	}
}

// noteEvents records the resolutions the steps report.
func (s *session) noteEvents(steps ...machine.Step) {
	for _, st := range steps {
		for _, ev := range st.Events {
			if status, ok := eventStatus[ev.Type]; ok {
				s.note(ev.SuspendID, status)
			}
		}
	}
}

// finalStatus is the index status of e, an entry that left pending: the
// call's own status while the tree keeps it, else the outcome this session
// saw, else expired if its deadline has passed by now (a run resolves
// expired calls first), else resolved (a command's Resume).
func (s *session) finalStatus(root *instance.Instance, e store.Suspension, now time.Time) store.Status {
	if _, c := root.FindCall(e.ID); c != nil && c.Status != instance.StatusPending {
		return store.Status(c.Status)
	}
	if st, ok := s.outcomes[e.ID]; ok {
		return st
	}
	if !e.Deadline.IsZero() && !e.Deadline.After(now) {
		return store.StatusExpired
	}
	return store.StatusResolved
}

// load loads machine id into a session; held is set for a run under the
// machine's hold. With a history cache it reads the history entries
// after the cached ones only, and the whole history when the cached one
// is not the stored one's beginning (the machine was created again, by
// another process perhaps). A run of a charter with a window
// (machine.CharterConfig.Window) that has no cached history loads the
// end of it only (loadEnd).
//
// A held session's effects record their outcomes with its saves (see
// journal); others', at once.
func (r *Runner) load(ctx context.Context, id string, held bool) (*session, error) {
	s, err := r.loadSession(ctx, id, held)
	if err != nil {
		return nil, err
	}
	s.journal = r.newJournal(id, held)
	s.bindJournal()
	s.bindRules()
	return s, nil
}

// bindJournal hands the session's journal, if any, to its machine.
func (s *session) bindJournal() {
	if s.journal != nil {
		s.m.SetEffectJournal(s.journal)
	}
}

// loadSession is load without the journal.
func (r *Runner) loadSession(ctx context.Context, id string, held bool) (*session, error) {
	tl, tails := r.store.(store.TailLoader)
	if !tails {
		snap, err := r.store.Load(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("load machine %s: %w", id, err)
		}
		return r.assemble(ctx, id, snap, cachedHistory{}, nil)
	}
	prefix := r.histories.get(id, held)
	var snap *store.Snapshot
	var m *machine.Machine // snap decoded, by loadEnd
	var err error
	if prefix.end() > 0 {
		snap, err = tl.LoadTail(ctx, id, prefix.end())
		if err == nil && (snap.Incarnation != prefix.incarnation || snap.HistoryFrom != prefix.end()) {
			prefix, snap = cachedHistory{}, nil // not the stored history's beginning
		}
	}
	switch {
	case err != nil || snap != nil:
	case held && r.charter.Window() > 0:
		snap, m, err = r.loadEnd(ctx, tl, id, endLoads*(r.charter.Window()+4), r.windowFits)
	default:
		snap, err = tl.LoadTail(ctx, id, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("load machine %s: %w", id, err)
	}
	s, err := r.assemble(ctx, id, snap, prefix, m)
	if err != nil {
		return nil, err
	}
	s.held = held
	return s, nil
}

// endLoads is how many windows (machine.CharterConfig.Window) of history
// a run's loadEnd reads first, and how many times longer loadEnd reads
// again while what it read falls short.
const endLoads = 4

// loadEnd loads machine id with the end of its history only: its last
// tail entries, read again endLoads times longer until the machine
// decoded from them is enough (or holds the whole history). The tree is
// read first, alone, for the history's length. It returns the snapshot it
// settled on and the machine decoded from it.
func (r *Runner) loadEnd(ctx context.Context, tl store.TailLoader, id string, tail int, enough func(*machine.Machine) bool) (*store.Snapshot, *machine.Machine, error) {
	snap, err := tl.LoadTail(ctx, id, math.MaxInt)
	for ; err == nil; tail *= endLoads {
		if snap, err = tl.LoadTail(ctx, id, max(0, snap.HistoryFrom+len(snap.History)-tail)); err != nil {
			break
		}
		m, decodeErr := r.decode(id, snap, message.History{})
		if decodeErr != nil {
			return nil, nil, decodeErr
		}
		if snap.HistoryFrom == 0 || enough(m) {
			return snap, m, nil
		}
	}
	return nil, nil, err
}

// loadWhole loads the whole history of the session's machine, when s
// holds the end of it only (loadEnd) and applying inputs may read further
// back (needsWhole): such inputs are rare, and they then apply as they
// would to a machine loaded whole. The machine is held: the store holds
// what s does, and more history.
func (s *session) loadWhole(ctx context.Context, inputs []machine.Input) error {
	if s.from == 0 || !needsWhole(s.m, inputs) {
		return nil
	}
	snap, err := s.r.store.Load(ctx, s.id)
	if err != nil {
		return fmt.Errorf("load machine %s: %w", s.id, err)
	}
	m, err := s.r.decode(s.id, snap, message.History{})
	if err != nil {
		return err
	}
	s.m, s.from, s.saved, s.savedSize = m, 0, len(snap.History), heldSize(snap.History)
	s.bindJournal()
	s.bindRules()
	return nil
}

// needsWhole reports whether applying inputs to m may read history that
// the end of it does not hold: a fresh-turn resume or signal digests the
// resumed instance's whole transcript, and a resume or cancel of a call
// m does not hold is told apart (already resolved, or unknown) by the
// history.
func needsWhole(m *machine.Machine, inputs []machine.Input) (needs bool) {
	access.MachineView(m, func(root *instance.Instance, _ message.History) {
		needs = needsHistory(root, inputs)
	})
	return needs
}

// needsHistory is needsWhole of the tree root.
func needsHistory(root *instance.Instance, inputs []machine.Input) bool {
	holds := func(id string) bool { _, c := root.FindCall(id); return c != nil }
	for _, in := range inputs {
		switch v := in.(type) {
		case machine.ResumeInput:
			if v.FreshTurn || !holds(v.SuspendID) {
				return true
			}
		case machine.SignalInput:
			if v.FreshTurn {
				return true
			}
		case machine.CancelInput:
			if !holds(v.SuspendID) {
				return true
			}
		}
	}
	return false
}

// windowFits reports whether m's history holds the window
// (machine.CharterConfig.Window) of every instance of its tree, and of
// any instance that starts (which sees the messages scoped to none): a
// run of it sees what it would over the whole history.
func (r *Runner) windowFits(m *machine.Machine) (fits bool) {
	access.MachineView(m, func(root *instance.Instance, h message.History) {
		ids := []string{""}
		for in := range root.Walk() {
			ids = append(ids, in.ID)
		}
		fits = h.WindowFits(r.charter.Window(), ids...)
	})
	return fits
}

// assemble decodes machine id's loaded snapshot into a session, with the
// machine's suspension index: the snapshot's history follows prefix, the
// history decoded already. A machine m decoded from snap already (with
// no prefix) is taken as it is.
func (r *Runner) assemble(ctx context.Context, id string, snap *store.Snapshot, prefix cachedHistory, m *machine.Machine) (*session, error) {
	if m == nil {
		var err error
		if m, err = r.decode(id, snap, prefix.history); err != nil {
			return nil, err
		}
	}
	indexed, err := r.store.ListSuspensions(ctx, store.Filter{MachineID: id})
	if err != nil {
		return nil, fmt.Errorf("load suspensions of %s: %w", id, err)
	}
	var eventSeq int64
	if r.CanWatch() {
		eventSeq = snap.EventSeq // a position in a log Watch reads
	}
	return &session{r: r, id: id, m: m, rev: snap.Revision, from: snap.HistoryFrom - prefix.history.Len(), saved: prefix.history.Len() + len(snap.History), indexed: indexed,
		incarnation: snap.Incarnation, savedSize: prefix.size + heldSize(snap.History), requests: snap.SuspendRequests, updatedAt: snap.UpdatedAt, eventSeq: eventSeq}, nil
}

// decode decodes machine id from snap, its history following prefix, for
// a session: every model reply is saved (a Replied step) before its
// tools run.
func (r *Runner) decode(id string, snap *store.Snapshot, prefix message.History) (*machine.Machine, error) {
	m, err := serialize.AssembleOnto(r.charter, snap.Tree, prefix, snap.History)
	if err != nil {
		return nil, fmt.Errorf("decode machine %s: %w", id, err)
	}
	m.SetCheckpoints(true)
	m.SetSuspendIDCheck(r.checkSuspendID)
	m.SetExpiry(!r.external)
	return m, nil
}

// checkSuspendID refuses a suspend ID that a handler chose
// (instance.WithID) when the store's index has it: suspend IDs are unique
// across the store's machines, and a clash found now fails the call, where
// the save would fail after the run. Two machines choosing one new ID at
// the same moment still meet at the save, whose conflict fails one run.
func (r *Runner) checkSuspendID(ctx context.Context, id string) error {
	_, err := r.store.FindSuspension(ctx, id)
	switch {
	case err == nil:
		return fmt.Errorf("%w: another suspension has it", executor.ErrDuplicateID)
	case errors.Is(err, store.ErrNotFound):
		return nil
	}
	return err
}

// messageOverhead is what a decoded message takes in memory beyond its
// encoded size (the message and part structs, slice and string headers):
// 220 to 240 bytes, measured over messages of short, 300-byte and
// 2,000-byte texts (TestHeldSizeTracksMemory).
const messageOverhead = 232

// heldSize estimates the memory the history entries take decoded: their
// encoded size and messageOverhead each.
func heldSize(entries [][]byte) int64 {
	n := int64(len(entries)) * messageOverhead
	for _, e := range entries {
		n += int64(len(e))
	}
	return n
}

// save writes the tree, the history added since the last save and the
// suspension index, conditional on the revision.
func (s *session) save(ctx context.Context) (err error) {
	if s.r.met.SaveOn(ctx) {
		defer s.r.met.Save(ctx, time.Now(), &err)
	}
	tree, err := serialize.MarshalTree(s.m)
	if err != nil {
		return fmt.Errorf("encode machine %s: %w", s.id, err)
	}
	// Taken after the tree is encoded: every call result the tree holds
	// has its effects' outcomes among them.
	ends := s.journal.take()
	defer func() {
		if err != nil && ends != nil {
			s.journal.flush(ctx, ends)
		}
	}()
	appended, err := s.encodeUnsaved()
	if err != nil {
		return err
	}
	pending := s.m.Pending()
	index := make([]store.Suspension, len(pending), len(pending)+len(s.indexed))
	current := make(map[string]bool, len(pending))
	for i, c := range pending {
		index[i] = store.Suspension{
			ID: c.SuspendID, MachineID: s.id, Status: store.Status(c.Status), Kind: string(c.Kind), Event: c.Event,
			Name: c.Name, Reason: c.Reason, Deadline: c.Deadline, RemindAt: c.RemindAt, CreatedAt: c.SuspendedAt,
		}
		current[c.SuspendID] = true
	}
	// Keep the most recent entries that left pending, with their final
	// status, so a late resume is told "already resolved".
	var done []store.Suspension
	now := s.r.charter.Now()
	access.MachineView(s.m, func(root *instance.Instance, _ message.History) {
		for _, e := range s.indexed {
			if current[e.ID] {
				continue
			}
			if e.Status == store.StatusPending {
				e.Status = s.finalStatus(root, e, now)
			}
			done = append(done, e)
		}
	})
	slices.SortStableFunc(done, func(a, b store.Suspension) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if err := s.announce(ctx, index); err != nil {
		return err
	}
	index = append(index, done[:min(len(done), ResolvedKept)]...)
	events, err := s.rec.take(s.rev + 1)
	if err != nil {
		return fmt.Errorf("save machine %s: %w", s.id, err)
	}
	decisions := s.m.TakeDecisions()
	ruled, uses := s.ruled(ctx, decisions)
	index = append(index, ruled...)
	audit, err := s.r.auditEntries(s.id, decisions)
	if err != nil {
		return fmt.Errorf("save machine %s: %w", s.id, err)
	}
	sv := store.Save{MachineID: s.id, Revision: s.rev, Tree: tree, Append: appended, Suspensions: index, Events: events, Effects: ends, Audit: audit}
	// A save that adds history and leaves the machine done ends a run:
	// one that applies no input or reply leaves it as it was.
	if len(pending) == 0 && len(appended) > 0 {
		if finished, answer := s.finished(); finished {
			sv.Finish = &store.Finish{Answer: answer}
		}
	}
	rev, err := s.write(ctx, sv)
	if err != nil {
		s.releaseUses(ctx, uses)
		return fmt.Errorf("save machine %s at revision %d: %w", s.id, s.rev, err)
	}
	s.rev, s.saved, s.indexed, s.savedSize = rev, s.saved+len(appended), index, s.savedSize+heldSize(appended)
	if s.held {
		// Saved up to its end: the whole history is the stored one.
		access.MachineView(s.m, func(_ *instance.Instance, h message.History) {
			s.r.histories.put(cachedHistory{id: s.id, incarnation: s.incarnation, from: s.from, history: h, size: s.savedSize})
		})
	}
	return nil
}

// encodeUnsaved encodes the history messages added since the last save.
func (s *session) encodeUnsaved() ([][]byte, error) {
	var appended [][]byte
	var encErr error
	access.MachineView(s.m, func(_ *instance.Instance, history message.History) {
		appended = make([][]byte, 0, history.Len()-s.saved)
		for _, msg := range history.Messages()[s.saved:] {
			b, err := serialize.MarshalMessage(msg)
			if err != nil {
				encErr = err
				return
			}
			appended = append(appended, b)
		}
	})
	if encErr != nil {
		return nil, fmt.Errorf("encode history of %s: %w", s.id, encErr)
	}
	return appended, nil
}

// write saves sv, and with a store.RequestReporter notes whether suspend
// requests are kept for the machine.
func (s *session) write(ctx context.Context, sv store.Save) (int64, error) {
	rr, ok := s.r.store.(store.RequestReporter)
	if !ok {
		return s.r.store.Save(ctx, sv)
	}
	rev, requests, err := rr.SaveReporting(ctx, sv)
	if err == nil {
		s.requests = requests
	}
	return rev, err
}

// announce calls the BeforeSave hook with the pending entries of index
// that the store does not have yet.
func (s *session) announce(ctx context.Context, pending []store.Suspension) error {
	if s.r.beforeSave == nil {
		return nil
	}
	var added []store.Suspension
	for _, e := range pending {
		if !slices.ContainsFunc(s.indexed, func(o store.Suspension) bool { return o.ID == e.ID }) {
			added = append(added, e)
		}
	}
	if len(added) == 0 {
		return nil
	}
	if err := s.r.beforeSave(ctx, s.id, added); err != nil {
		return fmt.Errorf("save machine %s: before save: %w", s.id, err)
	}
	return nil
}

// run applies inputs and runs the machine, yielding each step once it is
// saved. It runs the machine through Machine.Events so that the recorder
// logs every event with the save it belongs to.
func (s *session) run(ctx context.Context, inputs []machine.Input, yield func(machine.Step, error) bool) {
	recorded(ctx, s, s.applier(inputs), yield, func(applied []machine.Event) { s.proceed(ctx, applied, yield) })
}

// recorded applies what apply applies (inputs, expiries) with a recorder
// for the run's events and hands their events to body, which runs the
// machine on; a failed apply is yielded.
func recorded[T any](ctx context.Context, s *session, apply func(context.Context) ([]machine.Event, error), yield func(T, error) bool, body func([]machine.Event)) {
	s.rec = s.r.newRecorder(s.id)
	defer s.rec.close()
	defer s.journal.close(ctx)
	defer s.releaseUnsaved(ctx)
	applied, err := apply(ctx)
	if err != nil {
		var zero T
		yield(zero, err)
		return
	}
	body(applied)
}

// proceed yields the command steps among the events an apply returned,
// then runs the machine on, yielding each step once it is saved.
func (s *session) proceed(ctx context.Context, applied []machine.Event, yield func(machine.Step, error) bool) {
	drive(ctx, s, applied, yield, func(e machine.Event) bool {
		return e.Kind != machine.EventStep || yield(*e.Step, nil)
	}, func(e machine.Event) bool {
		if e.Kind != machine.EventStep {
			return true
		}
		st := *e.Step
		keep, err := s.saveStep(ctx, &st)
		if err != nil {
			yield(machine.Step{}, err)
			return false
		}
		return !keep || yield(st, nil)
	})
}

// drive hands the events an apply returned (saved already) to show, then
// runs the machine on, recording every event and handing it to each; false
// from show or each ends the run, and so does a step that is the run's
// last.
func drive[T any](ctx context.Context, s *session, applied []machine.Event, yield func(T, error) bool, show func(machine.Event) bool, each func(machine.Event) bool) {
	for _, e := range applied {
		if !show(e) || (e.Kind == machine.EventStep && e.Step.Done) {
			return
		}
	}
	for e, err := range s.m.Events(ctx) {
		if err != nil {
			var zero T
			yield(zero, err)
			return
		}
		s.rec.add(ctx, e, s.rev)
		if !each(e) {
			return
		}
	}
}

// applier returns the apply of inputs, for recorded.
func (s *session) applier(inputs []machine.Input) func(context.Context) ([]machine.Event, error) {
	return func(ctx context.Context) ([]machine.Event, error) { return s.apply(ctx, inputs) }
}

// apply applies inputs to the machine and saves them before any model
// call, unless every input is a user message: those ran no handler code
// and resolved nothing, so the first save of the run (the reply's
// checkpoint, or the step that ends its round) records them, and a run
// that fails or dies before it leaves the machine as it was, the caller
// told so. It returns the events of applying them (machine.ApplyEvents:
// what the handlers changed, and the command steps). Inputs the machine
// refuses fail with ErrRejected.
func (s *session) apply(ctx context.Context, inputs []machine.Input) ([]machine.Event, error) {
	if err := s.loadWhole(ctx, inputs); err != nil {
		return nil, err
	}
	s.noteInputs(inputs)
	events, err := s.m.ApplyEvents(ctx, inputs...)
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", ErrRejected, err)
		}
		return nil, err
	}
	return events, s.applied(ctx, events, !onlyMessages(inputs))
}

// applied records the events of an apply (or an expiry) and, with save,
// saves the machine.
func (s *session) applied(ctx context.Context, events []machine.Event, save bool) error {
	for _, e := range events {
		if e.Kind == machine.EventStep {
			s.noteEvents(*e.Step)
		}
		s.rec.add(ctx, e, s.rev)
	}
	if !save {
		return nil
	}
	return s.save(ctx)
}

// saveStep saves the machine after step st and applies the kept suspend
// requests due at its boundary (a step that is yielded reports those
// applied since the last one); keep is false for a checkpoint (a Replied
// step), saved if a reply calls a tool, and of no interest to Run's
// callers.
func (s *session) saveStep(ctx context.Context, st *machine.Step) (keep bool, err error) {
	s.noteEvents(*st)
	// A reply that calls no tool needs no checkpoint: nothing runs before
	// the step that ends its round, whose save records it.
	if st.Reason != machine.Replied || s.repliesCallTools() {
		if err := s.save(ctx); err != nil {
			return false, err
		}
	}
	parked, err := s.applyRequests(ctx, boundaryOf(*st))
	if err != nil {
		return false, err
	}
	s.parked = append(s.parked, parked...)
	if st.Reason == machine.Replied {
		return false, nil
	}
	s.noteParked(st)
	return true, nil
}

// repliesCallTools reports whether a model reply recorded on the tree
// (checkpoint mode) calls a tool.
func (s *session) repliesCallTools() (calls bool) {
	access.MachineView(s.m, func(root *instance.Instance, _ message.History) {
		for in := range root.Walk() {
			if in.Reply != nil && slices.ContainsFunc(in.Reply.Message.Parts, func(p message.Part) bool { return p.Kind == message.KindToolUse }) {
				calls = true
				return
			}
		}
	})
	return calls
}

// onlyMessages reports whether inputs are all user messages (true for
// none).
func onlyMessages(inputs []machine.Input) bool {
	for _, in := range inputs {
		if _, ok := in.(message.Message); !ok {
			return false
		}
	}
	return true
}
