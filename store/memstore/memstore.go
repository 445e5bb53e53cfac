// Package memstore is an in-memory [store.Store], for tests and for
// single-process programs that need no durability.
//
// It behaves like the SQL stores in every observable way (revisions,
// conflicts, the suspension index, claims, time precision) and copies every
// byte slice on the way in and out, so callers can neither corrupt it nor be
// surprised by it. It passes the store/storetest conformance suite.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/markov-agents/markov/internal/livehub"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// Store is an in-memory [store.Store]. The zero value is not usable; call
// [New].
type Store struct {
	// Now is the clock used for Snapshot.UpdatedAt; nil means time.Now. Set
	// it before first use.
	Now func() time.Time

	mu       sync.Mutex
	closed   bool
	machines map[string]*machine
	// suspensions indexes every machine's suspensions by suspend ID.
	suspensions map[string]*store.Suspension
	// replays maps each remembered key to when it expires; outcomes to
	// the outcome kept with it (store.OutcomeKeeper).
	replays  map[string]time.Time
	outcomes map[string][]byte
	// requests are the suspend requests of each machine, oldest first.
	requests map[string][]store.SuspendRequest
	// feed is the suspension feed, oldest first; cursor is the last
	// cursor given.
	feed   []store.SuspensionChange
	cursor int64
	// floors is the last sequence number of the event log of each
	// machine ID deleted with one, until a machine of the ID is created
	// again (machine.floor then keeps it).
	floors map[string]int64
	// hub wakes the subscriptions (events.go).
	hub livehub.Hub
	// effects is the effect journal, by key.
	effects map[string]store.Effect
	// records are the records of store.RecordKeeper, by kind and key.
	records map[[2]string]store.Record
	// audit is the audit log, oldest first.
	audit []store.AuditEntry
	// ruleUses are the uses of each standing rule, by suspend ID
	// (store.RuleUses).
	ruleUses map[string]map[string]bool
}

type machine struct {
	revision    int64
	incarnation int64
	tree        []byte
	history     [][]byte
	updatedAt   time.Time
	// suspensions are the IDs of the machine's entries in Store.suspensions.
	suspensions []string
	// events is the machine's event log, oldest first; floor is the
	// sequence number before its first entry (the ID's deleted logs'
	// last, 0 if none).
	events []store.LogEvent
	floor  int64
}

// lastSeq is the sequence number of the last entry of m's log, the floor
// when it has none.
func (m *machine) lastSeq() int64 { return m.floor + int64(len(m.events)) }

// Store implements the core interface and every optional capability but
// store.Pinger: it has no schema to check.
var _ backend.Capabilities = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		machines:    make(map[string]*machine),
		suspensions: make(map[string]*store.Suspension),
		replays:     make(map[string]time.Time),
		effects:     make(map[string]store.Effect),
		records:     make(map[[2]string]store.Record),
		outcomes:    make(map[string][]byte),
		requests:    make(map[string][]store.SuspendRequest),
		floors:      make(map[string]int64),
		ruleUses:    make(map[string]map[string]bool),
	}
}

func norm(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(store.TimePrecision)
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return norm(s.Now())
	}
	return norm(time.Now())
}

// lock takes the mutex after checking the context and that the store is open.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("memstore: store is closed")
	}
	return nil
}

// Load implements [store.Store].
func (s *Store) Load(ctx context.Context, machineID string) (*store.Snapshot, error) {
	return s.LoadTail(ctx, machineID, 0)
}

// LoadTail implements [store.TailLoader].
func (s *Store) LoadTail(ctx context.Context, machineID string, from int) (*store.Snapshot, error) {
	if from < 0 {
		return nil, fmt.Errorf("memstore: load machine %q: %w: history from %d", machineID, store.ErrInvalid, from)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	m, ok := s.machines[machineID]
	if !ok {
		return nil, fmt.Errorf("memstore: load machine %q: %w", machineID, store.ErrNotFound)
	}
	from = min(from, len(m.history))
	h := cloneAll(m.history[from:])
	return &store.Snapshot{
		MachineID:   machineID,
		Revision:    m.revision,
		Tree:        clone(m.tree),
		History:     h,
		HistoryFrom: from,
		Incarnation: m.incarnation,
		UpdatedAt:   m.updatedAt,

		SuspendRequests: len(s.requests[machineID]) > 0,
		EventSeq:        m.lastSeq(),
	}, nil
}

// cloneAll copies entries into one array: each copy is capped, so that
// appending to one never reaches the next.
func cloneAll(entries [][]byte) [][]byte {
	n := 0
	for _, e := range entries {
		n += len(e)
	}
	h := make([][]byte, len(entries))
	all := make([]byte, 0, n)
	for i, e := range entries {
		all = append(all, e...)
		h[i] = all[len(all)-len(e) : len(all) : len(all)]
	}
	return h
}

// clone copies b, never returning nil.
func clone(b []byte) []byte {
	return append([]byte{}, b...)
}

// Save implements [store.Store].
func (s *Store) Save(ctx context.Context, sv store.Save) (int64, error) {
	rev, _, err := s.SaveReporting(ctx, sv)
	return rev, err
}

// SaveReporting implements [store.RequestReporter].
func (s *Store) SaveReporting(ctx context.Context, sv store.Save) (revision int64, requests bool, err error) {
	if err := sv.Validate(); err != nil {
		return 0, false, err
	}
	if err := s.lock(ctx); err != nil {
		return 0, false, err
	}
	defer s.mu.Unlock()

	m, exists := s.machines[sv.MachineID]
	var stored int64
	if exists {
		stored = m.revision
	}
	if err := store.CheckRevision(sv.Revision, stored, exists); err != nil {
		return 0, false, fmt.Errorf("memstore: save machine %q: %w", sv.MachineID, err)
	}
	for _, sp := range sv.Suspensions {
		if cur, ok := s.suspensions[sp.ID]; ok && cur.MachineID != sv.MachineID {
			return 0, false, fmt.Errorf("memstore: save machine %q: suspend ID %q belongs to machine %q: %w", sv.MachineID, sp.ID, cur.MachineID, store.ErrInvalid)
		}
	}

	// Validated: from here on nothing fails.
	if !exists {
		m = &machine{incarnation: store.NewIncarnation(), floor: s.floors[sv.MachineID]}
		s.machines[sv.MachineID] = m
		delete(s.floors, sv.MachineID)
	}
	m.revision++
	m.tree = clone(sv.Tree)
	for _, e := range sv.Append {
		m.history = append(m.history, clone(e))
	}
	m.updatedAt = s.now()
	for _, e := range sv.Events {
		m.events = append(m.events, store.LogEvent{Seq: m.lastSeq() + 1, Data: clone(e), At: m.updatedAt})
	}
	changed := s.replaceSuspensionsLocked(m, sv)
	if sv.Finish != nil {
		s.cursor++
		s.feed = append(s.feed, store.SuspensionChange{Cursor: s.cursor, Suspension: store.Suspension{MachineID: sv.MachineID},
			Machine: &store.MachineChange{Event: store.MachineFinished, Revision: m.revision, Answer: sv.Finish.Answer}, At: m.updatedAt})
		changed = true
	}
	for _, e := range sv.Effects {
		s.endEffectLocked(e)
	}
	s.appendAuditLocked(sv.Audit)
	if len(sv.Events) > 0 {
		s.hub.Notify(sv.MachineID)
	}
	if changed {
		s.hub.Notify(feedKey)
	}
	return m.revision, len(s.requests[sv.MachineID]) > 0, nil
}

// replaceSuspensionsLocked replaces the index entries of m with those of
// sv, keeping the claim lease of suspend IDs that stay, and adds the
// changes to the feed; it reports whether there were any.
func (s *Store) replaceSuspensionsLocked(m *machine, sv store.Save) (changed bool) {
	claims := make(map[string]time.Time, len(m.suspensions))
	was := make(map[string]store.Status, len(m.suspensions))
	for _, id := range m.suspensions {
		claims[id] = s.suspensions[id].ClaimedUntil
		was[id] = s.suspensions[id].Status
		delete(s.suspensions, id)
	}
	m.suspensions = m.suspensions[:0]
	for _, sp := range sv.Suspensions {
		sp.MachineID = sv.MachineID
		sp.Deadline = norm(sp.Deadline)
		sp.RemindAt = norm(sp.RemindAt)
		sp.CreatedAt = norm(sp.CreatedAt)
		sp.ClaimedUntil = claims[sp.ID]
		s.suspensions[sp.ID] = &sp
		m.suspensions = append(m.suspensions, sp.ID)
		if st, ok := was[sp.ID]; !ok || st != sp.Status {
			s.cursor++
			ch := sp
			ch.ClaimedUntil = time.Time{}
			s.feed = append(s.feed, store.SuspensionChange{Cursor: s.cursor, Suspension: ch, At: m.updatedAt})
			changed = true
		}
	}
	return changed
}

// Delete implements [store.Store].
func (s *Store) Delete(ctx context.Context, machineID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	m, ok := s.machines[machineID]
	if !ok {
		return fmt.Errorf("memstore: delete machine %q: %w", machineID, store.ErrNotFound)
	}
	for _, id := range m.suspensions {
		delete(s.suspensions, id)
	}
	if last := m.lastSeq(); last > 0 {
		s.floors[machineID] = last // sequence numbers never repeat (store.EventLog)
	}
	delete(s.machines, machineID)
	delete(s.requests, machineID)
	maps.DeleteFunc(s.effects, func(_ string, e store.Effect) bool { return e.MachineID == machineID })
	s.feed = slices.DeleteFunc(s.feed, func(c store.SuspensionChange) bool { return c.Suspension.MachineID == machineID })
	return nil
}

// ListMachines implements [store.MachineLister].
func (s *Store) ListMachines(ctx context.Context) ([]string, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.machines))
	for id := range s.machines {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// FindSuspension implements [store.Store].
func (s *Store) FindSuspension(ctx context.Context, suspendID string) (store.Suspension, error) {
	if err := s.lock(ctx); err != nil {
		return store.Suspension{}, err
	}
	defer s.mu.Unlock()
	sp, ok := s.suspensions[suspendID]
	if !ok {
		return store.Suspension{}, fmt.Errorf("memstore: find suspension %q: %w", suspendID, store.ErrNotFound)
	}
	return *sp, nil
}

// ListSuspensions implements [store.Store].
func (s *Store) ListSuspensions(ctx context.Context, f store.Filter) ([]store.Suspension, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: list suspensions: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	f.DeadlineBefore = norm(f.DeadlineBefore)
	return s.selectLocked(f.Limit, f.Match), nil
}

// selectLocked returns up to limit suspensions that match, in store order.
func (s *Store) selectLocked(limit int, match func(store.Suspension) bool) []store.Suspension {
	var out []store.Suspension
	for _, sp := range s.suspensions {
		if match(*sp) {
			out = append(out, *sp)
		}
	}
	slices.SortFunc(out, store.CompareSuspensions)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// ClaimExpired implements [store.ExpiryClaimer].
func (s *Store) ClaimExpired(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]store.Suspension, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("memstore: claim expired: %w: lease %v is not positive", store.ErrInvalid, lease)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	until := norm(now.Add(lease))
	now = norm(now)
	out := s.selectLocked(limit, func(sp store.Suspension) bool { return store.Claimable(sp, now) })
	for i := range out {
		s.suspensions[out[i].ID].ClaimedUntil = until
		out[i].ClaimedUntil = until
	}
	return out, nil
}

// Remember implements [store.ReplayGuard], on the store's clock (Now). It
// deletes every expired record.
func (s *Store) Remember(ctx context.Context, key string, expiresAt time.Time) (bool, error) {
	if !store.ValidID(key) {
		return false, fmt.Errorf("memstore: remember: %w: the key is not a valid ID", store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	now := s.now()
	for k, until := range s.replays {
		if !until.After(now) {
			delete(s.replays, k)
			delete(s.outcomes, k)
		}
	}
	if _, live := s.replays[key]; live {
		return false, nil
	}
	s.replays[key] = norm(expiresAt)
	return true, nil
}

// Forget implements [store.ReplayGuard].
func (s *Store) Forget(ctx context.Context, key string) error {
	if !store.ValidID(key) {
		return fmt.Errorf("memstore: forget: %w: the key is not a valid ID", store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.replays, key)
	delete(s.outcomes, key)
	return nil
}

// KeepOutcome implements [store.OutcomeKeeper].
func (s *Store) KeepOutcome(ctx context.Context, key string, outcome []byte) error {
	if !store.ValidID(key) {
		return fmt.Errorf("memstore: keep outcome: %w: the key is not a valid ID", store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if until, ok := s.replays[key]; ok && until.After(s.now()) {
		s.outcomes[key] = bytes.Clone(outcome)
	}
	return nil
}

// Outcome implements [store.OutcomeKeeper].
func (s *Store) Outcome(ctx context.Context, key string) ([]byte, error) {
	if !store.ValidID(key) {
		return nil, fmt.Errorf("memstore: outcome: %w: the key is not a valid ID", store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if until, ok := s.replays[key]; !ok || !until.After(s.now()) {
		return nil, fmt.Errorf("memstore: outcome: %w", store.ErrNotFound)
	}
	return bytes.Clone(s.outcomes[key]), nil
}

// Close makes every later call fail with an error.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// BeginEffect implements [store.EffectJournal].
func (s *Store) BeginEffect(ctx context.Context, e store.Effect) (store.Effect, bool, error) {
	if err := store.CheckEffect(e); err != nil {
		return store.Effect{}, false, fmt.Errorf("memstore: begin effect: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return store.Effect{}, false, err
	}
	defer s.mu.Unlock()
	if old, ok := s.effects[e.Key]; ok {
		return cloneEffect(old), false, nil
	}
	e.Status, e.Result, e.StartedAt, e.EndedAt = store.EffectStarted, nil, s.now(), time.Time{}
	s.effects[e.Key] = e
	return e, true, nil
}

// EndEffect implements [store.EffectJournal].
func (s *Store) EndEffect(ctx context.Context, key string, status store.EffectStatus, result []byte) error {
	if err := store.CheckEffectEnd(key, status); err != nil {
		return fmt.Errorf("memstore: end effect: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if !s.endEffectLocked(store.EffectEnd{Key: key, Status: status, Result: result}) {
		return fmt.Errorf("memstore: end effect %q: %w: not started", key, store.ErrConflict)
	}
	return nil
}

// endEffectLocked records the outcome end of a started effect; it
// reports false, changing nothing, when the effect is not started.
func (s *Store) endEffectLocked(end store.EffectEnd) bool {
	e, ok := s.effects[end.Key]
	if !ok || e.Status != store.EffectStarted {
		return false
	}
	e.Status, e.Result, e.EndedAt = end.Status, slices.Clone(end.Result), s.now()
	s.effects[end.Key] = e
	return true
}

// ForgetEffect implements [store.EffectJournal].
func (s *Store) ForgetEffect(ctx context.Context, key string) error {
	if !store.ValidID(key) {
		return fmt.Errorf("memstore: forget effect: %w: effect key %q", store.ErrInvalid, key)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.effects, key)
	return nil
}

func cloneEffect(e store.Effect) store.Effect {
	e.Result = slices.Clone(e.Result)
	return e
}
