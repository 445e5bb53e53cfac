package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/internal/backend"
)

// Notification payloads: a commit says "read the log"; a live payload is
// livePrefix and the payload.
const (
	commitNotice = "c"
	livePrefix   = "l"
)

// channel is the NOTIFY channel of machineID's log, or of the suspension
// feed when machineID is empty, in this store's schema.
func (s *Store) channel(machineID string) string {
	h := sha256.Sum256([]byte(s.schema + "\x00" + machineID))
	return "markov_" + hex.EncodeToString(h[:12])
}

// watchKey is the advisory lock key that the subscribers of machineID's
// channel (the feed's when machineID is empty) hold shared while they
// listen. A notifier that gets it exclusively knows that nobody listens,
// and sends nothing: a NOTIFY takes a lock that every notifying
// transaction of the database queues on until it has committed (its WAL
// flush included), so notices nobody hears would serialize every save.
func (s *Store) watchKey(machineID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("markov/watch:" + s.schema + "\x00" + machineID))
	return int64(h.Sum64())
}

// notifyWatched NOTIFYs the channel of machineID with the commit notice
// when the transaction commits, if anyone listens: the exclusive
// transaction lock on its watch key, held until the commit, makes a
// subscriber that comes meanwhile wait for the commit before it LISTENs
// and reads.
const notifyWatched = `SELECT pg_notify($1, $2) WHERE NOT pg_try_advisory_xact_lock($3)`

// appendEvents appends entries to the machine's event log, after its
// last sequence number or, in an empty log, the machine ID's floor, and
// notifies its watchers when the transaction commits.
func (s *Store) appendEvents(ctx context.Context, tx pgx.Tx, machineID string, entries [][]byte, now time.Time) error {
	if len(entries) == 0 {
		return nil
	}
	data := make([][]byte, len(entries))
	for i, e := range entries {
		data[i] = backend.NonNil(e)
	}
	_, err := tx.Exec(ctx, s.q.appendEvents, machineID, data, now)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, notifyWatched, s.channel(machineID), commitNotice, s.watchKey(machineID))
	return err
}

// feedChanges adds to the suspension feed each suspension of sv that is
// new or whose status differs from was, and notifies the feed's watchers
// when the transaction commits.
func (s *Store) feedChanges(ctx context.Context, tx pgx.Tx, sv store.Save, was map[string]string) error {
	var changed []store.Suspension
	for _, sp := range sv.Suspensions {
		if st, ok := was[sp.ID]; !ok || st != string(sp.Status) {
			changed = append(changed, sp)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	var last int64
	if err := tx.QueryRow(ctx, s.q.expand(`UPDATE {s}.feed_cursor SET last = last + $1 RETURNING last`), len(changed)).Scan(&last); err != nil {
		return err
	}
	batch := &pgx.Batch{}
	now := s.now()
	for i, sp := range changed {
		batch.Queue(s.q.expand(`INSERT INTO {s}.suspension_feed
			(cursor, suspend_id, machine_id, status, kind, name, reason, deadline, created_at, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`),
			last-int64(len(changed)-1-i), sp.ID, sv.MachineID, string(sp.Status), sp.Kind, sp.Name, sp.Reason,
			ts(sp.Deadline), ts(sp.CreatedAt), now)
	}
	batch.Queue(notifyWatched, s.channel(""), commitNotice, s.watchKey(""))
	return tx.SendBatch(ctx, batch).Close()
}

// feedMachine adds machine change c of machineID to the suspension feed,
// and notifies the feed's watchers when the transaction commits.
func (s *Store) feedMachine(ctx context.Context, tx pgx.Tx, machineID string, c store.MachineChange) error {
	b, err := backend.EncodeMachineChange(c)
	if err != nil {
		return err
	}
	batch := &pgx.Batch{}
	batch.Queue(s.q.expand(`WITH c AS (UPDATE {s}.feed_cursor SET last = last + 1 RETURNING last)
		INSERT INTO {s}.suspension_feed (cursor, suspend_id, machine_id, status, kind, name, reason, at, machine)
		SELECT last, '', $1, '', '', '', '', $2, $3 FROM c`), machineID, s.now(), b)
	batch.Queue(notifyWatched, s.channel(""), commitNotice, s.watchKey(""))
	return tx.SendBatch(ctx, batch).Close()
}

// limitOrAll is a LIMIT argument: NULL (no limit) when limit <= 0.
func limitOrAll(limit int) *int {
	if limit <= 0 {
		return nil
	}
	return &limit
}

// ReadEvents implements [store.EventLog].
func (s *Store) ReadEvents(ctx context.Context, machineID string, afterSeq int64, limit int) ([]store.LogEvent, error) {
	if store.CheckID(machineID) != nil {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.expand(`SELECT seq, data, at FROM {s}.events
		WHERE machine_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`), machineID, afterSeq, limitOrAll(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: read events of %q: %w", machineID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LogEvent, error) {
		var e store.LogEvent
		err := row.Scan(&e.Seq, &e.Data, &e.At)
		e.Data, e.At = backend.NonNil(e.Data), e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read events of %q: %w", machineID, err)
	}
	return out, nil
}

// ReadSuspensionChanges implements [store.EventLog].
func (s *Store) ReadSuspensionChanges(ctx context.Context, afterCursor int64, limit int) ([]store.SuspensionChange, error) {
	rows, err := s.pool.Query(ctx, s.q.expand(`SELECT cursor, suspend_id, machine_id, status, kind, name, reason, deadline, created_at, at, machine
		FROM {s}.suspension_feed WHERE cursor > $1 ORDER BY cursor LIMIT $2`), afterCursor, limitOrAll(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: read suspension changes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SuspensionChange, error) {
		var c store.SuspensionChange
		sp := &c.Suspension
		var deadline, created pgtype.Timestamptz
		var mc []byte
		if err := row.Scan(&c.Cursor, &sp.ID, &sp.MachineID, &sp.Status, &sp.Kind, &sp.Name, &sp.Reason, &deadline, &created, &c.At, &mc); err != nil {
			return c, err
		}
		sp.Deadline, sp.CreatedAt, c.At = fromTS(deadline), fromTS(created), c.At.UTC()
		var err error
		c.Machine, err = backend.DecodeMachineChange(mc)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read suspension changes: %w", err)
	}
	return out, nil
}

// Publish implements [store.EventLog]: one NOTIFY per payload, in one
// transaction (delivered in order), unless nobody subscribes to the
// machine (see watchKey).
func (s *Store) Publish(ctx context.Context, machineID string, payloads [][]byte) error {
	if err := store.CheckLive(machineID, payloads); err != nil {
		return fmt.Errorf("postgres: publish: %w", err)
	}
	if len(payloads) == 0 {
		return nil
	}
	texts := make([]string, len(payloads))
	for i, p := range payloads {
		texts[i] = livePrefix + string(p)
	}
	_, err := s.pool.Exec(ctx, `WITH w AS (SELECT NOT pg_try_advisory_xact_lock($3) AS watched)
		SELECT pg_notify($1, p) FROM w, unnest($2::text[]) WITH ORDINALITY AS t (p, ord) WHERE w.watched ORDER BY ord`,
		s.channel(machineID), texts, s.watchKey(machineID))
	if err != nil {
		return fmt.Errorf("postgres: publish: %w", err)
	}
	return nil
}

// Subscribe implements [store.EventLog]: it takes a connection of its own
// from the pool (and out of it: Close closes it), holds the machine's
// watch key shared on it (notices are sent only while some session holds
// it) and LISTENs on it.
func (s *Store) Subscribe(ctx context.Context, machineID string) (store.Subscription, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: subscribe: %w", err)
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, s.watchKey(machineID)); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("postgres: subscribe: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel(machineID)}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("postgres: subscribe: %w", err)
	}
	return &subscription{conn: conn}, nil
}

// subscription is a [store.Subscription] on a LISTENing connection.
type subscription struct{ conn *pgx.Conn }

// Next implements [store.Subscription]: it waits for a notification on
// the connection (no polling).
func (s *subscription) Next(ctx context.Context) (store.Notice, error) {
	note, err := s.conn.WaitForNotification(ctx)
	if err != nil {
		return store.Notice{}, err
	}
	if p, ok := strings.CutPrefix(note.Payload, livePrefix); ok {
		return store.Notice{Live: [][]byte{[]byte(p)}}, nil
	}
	return store.Notice{Appended: true}, nil
}

// Close implements [store.Subscription].
func (s *subscription) Close() error {
	if s.conn.IsClosed() {
		return nil
	}
	return s.conn.Close(context.Background())
}
