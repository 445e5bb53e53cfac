package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/markov-agents/markov/internal/livehub"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// feedKey is the hub key of the suspension feed (machine IDs are never
// empty).
const feedKey = ""

// Polling of other processes' writes: fastest while things happen,
// backing off to slowest when nothing does.
const (
	pollFastest = 20 * time.Millisecond
	pollSlowest = time.Second
)

// liveKept is how long a live payload stays in live_events for the
// watchers of other processes.
const liveKept = time.Minute

// appendEvents appends entries to the machine's event log, whose last
// sequence number is last (0: the log is empty, and goes on from the
// machine ID's floor).
func appendEvents(ctx context.Context, tx txer, machineID string, last int64, entries [][]byte, now int64) error {
	if len(entries) == 0 {
		return nil
	}
	if last == 0 {
		// Scanned into a variable of the block: &last would move last
		// to the heap at every call.
		var floor int64
		err := tx.QueryRowContext(ctx, `SELECT seq FROM event_floors WHERE machine_id = ?`, machineID).Scan(&floor)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		last = floor
	}
	for start := 0; start < len(entries); start += maxHistoryRows {
		chunk := entries[start:min(start+maxHistoryRows, len(entries))]
		var q strings.Builder
		q.WriteString(`INSERT INTO events (machine_id, seq, data, at) VALUES `)
		args := make([]any, 0, 4*len(chunk))
		for i, e := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?)")
			args = append(args, machineID, last+int64(start+i)+1, backend.NonNil(e), now)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// limitClause is the LIMIT of a read of up to limit rows (all if <= 0).
func limitClause(limit int) string {
	if limit <= 0 {
		return ""
	}
	return fmt.Sprintf(" LIMIT %d", limit)
}

// ReadEvents implements [store.EventLog].
func (s *Store) ReadEvents(ctx context.Context, machineID string, afterSeq int64, limit int) ([]store.LogEvent, error) {
	if store.CheckID(machineID) != nil {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, data, at FROM events WHERE machine_id = ? AND seq > ? ORDER BY seq`+limitClause(limit), machineID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read events of %q: %w", machineID, err)
	}
	defer rows.Close()
	var out []store.LogEvent
	for rows.Next() {
		var e store.LogEvent
		var at int64
		if err := rows.Scan(&e.Seq, &e.Data, &at); err != nil {
			return nil, fmt.Errorf("sqlite: read events of %q: %w", machineID, err)
		}
		e.Data, e.At = backend.NonNil(e.Data), time.UnixMicro(at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read events of %q: %w", machineID, err)
	}
	return out, nil
}

// feedMachine adds machine change c of machineID to the suspension feed.
func feedMachine(ctx context.Context, tx txer, machineID string, c store.MachineChange, now int64) error {
	b, err := backend.EncodeMachineChange(c)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO suspension_feed (suspend_id, machine_id, status, kind, name, reason, at, machine)
		VALUES ('', ?, '', '', '', '', ?, ?)`, machineID, now, b)
	return err
}

// ReadSuspensionChanges implements [store.EventLog].
func (s *Store) ReadSuspensionChanges(ctx context.Context, afterCursor int64, limit int) ([]store.SuspensionChange, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT cursor, suspend_id, machine_id, status, kind, name, reason, deadline, created_at, at, machine
		FROM suspension_feed WHERE cursor > ? ORDER BY cursor`+limitClause(limit), afterCursor)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read suspension changes: %w", err)
	}
	defer rows.Close()
	var out []store.SuspensionChange
	for rows.Next() {
		var c store.SuspensionChange
		sp := &c.Suspension
		var deadline, created sql.NullInt64
		var at int64
		var mc []byte
		if err := rows.Scan(&c.Cursor, &sp.ID, &sp.MachineID, &sp.Status, &sp.Kind, &sp.Name, &sp.Reason, &deadline, &created, &at, &mc); err != nil {
			return nil, fmt.Errorf("sqlite: read suspension changes: %w", err)
		}
		sp.Deadline, sp.CreatedAt, c.At = fromMicros(deadline), fromMicros(created), time.UnixMicro(at).UTC()
		var err error
		if c.Machine, err = backend.DecodeMachineChange(mc); err != nil {
			return nil, fmt.Errorf("sqlite: read suspension changes: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read suspension changes: %w", err)
	}
	return out, nil
}

// Publish implements [store.EventLog]: the payloads go into live_events,
// where the watchers of other processes poll them, and straight to this
// process's. Their commits do not wait for the disk (see liveSync). When
// no machine subscription is open in any process (watchers.go), nothing
// is written: nobody could receive them.
func (s *Store) Publish(ctx context.Context, machineID string, payloads [][]byte) error {
	if err := store.CheckLive(machineID, payloads); err != nil {
		return fmt.Errorf("sqlite: publish: %w", err)
	}
	if len(payloads) == 0 || !s.readOnly && !s.watch.watched() {
		return nil
	}
	items := make([]livehub.Item, 0, len(payloads))
	now := s.now()
	err := s.writeOn(ctx, true, func(sqlTx *sql.Tx) error {
		tx := cachedTx{tx: sqlTx, cache: &s.stmts}
		if s.pruned.Load() < now.Add(-liveKept/6).UnixMicro() {
			if _, err := tx.ExecContext(ctx, `DELETE FROM live_events WHERE at < ?`, now.Add(-liveKept).UnixMicro()); err != nil {
				return err
			}
			s.pruned.Store(now.UnixMicro())
		}
		for _, p := range payloads {
			var id int64
			if err := tx.QueryRowContext(ctx, `INSERT INTO live_events (machine_id, data, at) VALUES (?, ?, ?) RETURNING id`,
				machineID, backend.NonNil(p), now.UnixMicro()).Scan(&id); err != nil {
				return err
			}
			items = append(items, livehub.Item{ID: id, Data: append([]byte(nil), p...)})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: publish: %w", err)
	}
	s.hub.Notify(machineID, items...)
	return nil
}

// Subscribe implements [store.EventLog].
func (s *Store) Subscribe(ctx context.Context, machineID string) (store.Subscription, error) {
	if machineID != feedKey {
		// Registered before the marks are read: a payload published
		// after them is written for this subscription to find.
		s.watch.watch()
	}
	sub := &subscription{s: s, id: machineID, sub: s.hub.Subscribe(machineID), delay: pollFastest}
	mark, live, err := sub.marks(ctx)
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("sqlite: subscribe: %w", err)
	}
	sub.mark, sub.lastLive = mark, live
	return sub, nil
}

// subscription is a [store.Subscription]: woken by the hub within the
// process, by polling across processes.
type subscription struct {
	s   *Store
	id  string // "" for the feed
	sub *livehub.Sub
	// mark is the last sequence number (or feed cursor) seen, lastLive the
	// ID of the last live payload handed out.
	mark, lastLive int64
	delay          time.Duration
	closed         bool
}

// marks reads the last sequence number (or cursor) and live payload ID.
func (s *subscription) marks(ctx context.Context) (mark, live int64, err error) {
	if s.id == feedKey {
		err = s.s.db.QueryRowContext(ctx, `SELECT coalesce(max(cursor), 0) FROM suspension_feed`).Scan(&mark)
		return mark, 0, err
	}
	err = s.s.db.QueryRowContext(ctx, `SELECT
		(SELECT coalesce(max(seq), 0) FROM events WHERE machine_id = ?),
		(SELECT coalesce(max(id), 0) FROM live_events WHERE machine_id = ?)`, s.id, s.id).Scan(&mark, &live)
	return mark, live, err
}

// Next implements [store.Subscription].
func (s *subscription) Next(ctx context.Context) (store.Notice, error) {
	timer := time.NewTimer(s.delay)
	defer timer.Stop()
	for {
		select {
		case <-s.sub.Wake():
			s.delay = pollFastest
			return store.Notice{Live: s.fresh(s.sub.Take()), Appended: true}, nil
		case <-ctx.Done():
			return store.Notice{}, ctx.Err()
		case <-timer.C:
		}
		n, ok, err := s.poll(ctx)
		if err != nil {
			return store.Notice{}, fmt.Errorf("sqlite: poll: %w", err)
		}
		if ok {
			s.delay = pollFastest
			return n, nil
		}
		s.delay = min(2*s.delay, pollSlowest)
		timer.Reset(s.delay)
	}
}

// fresh returns the data of the items after lastLive, and moves it on.
func (s *subscription) fresh(items []livehub.Item) [][]byte {
	var out [][]byte
	for _, it := range items {
		if it.ID > s.lastLive {
			out = append(out, it.Data)
			s.lastLive = it.ID
		}
	}
	return out
}

// poll reads what other processes wrote since the last look; ok reports
// whether there is anything.
func (s *subscription) poll(ctx context.Context) (n store.Notice, ok bool, err error) {
	mark, live, err := s.marks(ctx)
	if err != nil {
		return n, false, err
	}
	if live > s.lastLive {
		rows, err := s.s.db.QueryContext(ctx, `SELECT id, data FROM live_events WHERE machine_id = ? AND id > ? ORDER BY id`, s.id, s.lastLive)
		if err != nil {
			return n, false, err
		}
		defer rows.Close()
		var items []livehub.Item
		for rows.Next() {
			var it livehub.Item
			if err := rows.Scan(&it.ID, &it.Data); err != nil {
				return n, false, err
			}
			items = append(items, it)
		}
		if err := rows.Err(); err != nil {
			return n, false, err
		}
		n.Live = s.fresh(items)
	}
	n.Appended = mark != s.mark
	ok = n.Appended || len(n.Live) > 0
	s.mark = mark
	return n, ok, nil
}

// Close implements [store.Subscription].
func (s *subscription) Close() error {
	if !s.closed {
		s.closed = true
		s.sub.Close()
		if s.id != feedKey {
			s.s.watch.unwatch()
		}
	}
	return nil
}
