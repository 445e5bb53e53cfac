package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultLockConns is how many machines one Store can hold locked at once
// when Config.LockConns is zero: each held lock keeps one connection of a
// pool of its own.
const DefaultLockConns = 32

// lockPool is the pool whose connections hold machine locks, opened on
// first use from the store pool's configuration.
type lockPool struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
	// held are the connections holding a lock: Close closes them, which
	// releases their locks.
	mu   sync.Mutex
	held map[*pgxpool.Conn]struct{}
}

// close releases every lock still held and closes the pool.
func (l *lockPool) close() {
	l.mu.Lock()
	for c := range l.held {
		c.Hijack().Close(context.Background())
	}
	l.held = nil
	l.mu.Unlock()
	if l.pool != nil {
		l.pool.Close()
	}
}

// keep records c as holding a lock; drop forgets it and reports whether
// it was still held (not closed by close).
func (l *lockPool) keep(c *pgxpool.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[*pgxpool.Conn]struct{}{}
	}
	l.held[c] = struct{}{}
}

func (l *lockPool) drop(c *pgxpool.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[c]
	delete(l.held, c)
	return ok
}

// LockMachine takes the exclusive lock of machineID, shared by every
// process that uses the database, and returns the function that releases
// it (package durable's Locker: durable.Runner holds it for the whole of a
// run). The lock is a session advisory lock on a connection of a pool kept
// for locks, so it is released when the process dies or its connection
// breaks. With wait false a lock held elsewhere returns ok false at once.
func (s *Store) LockMachine(ctx context.Context, machineID string, wait bool) (unlock func(), ok bool, err error) {
	s.locks.once.Do(func() {
		cfg := s.pool.Config()
		cfg.MaxConns = int32(s.lockConns)
		cfg.MinConns = 0
		s.locks.pool, s.locks.err = pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	})
	if s.locks.err != nil {
		return nil, false, fmt.Errorf("postgres: lock machine %q: %w", machineID, s.locks.err)
	}
	c, err := s.locks.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: lock machine %q: %w", machineID, err)
	}
	key := s.lockKey(machineID)
	ok = true
	if wait {
		_, err = c.Exec(ctx, `SELECT pg_advisory_lock($1)`, key)
	} else {
		err = c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok)
	}
	if err != nil {
		// The lock may have been granted as the wait was cancelled: a
		// connection in doubt is closed, which releases it.
		c.Hijack().Close(context.WithoutCancel(ctx))
		return nil, false, fmt.Errorf("postgres: lock machine %q: %w", machineID, err)
	}
	if !ok {
		c.Release()
		return nil, false, nil
	}
	s.locks.keep(c)
	return sync.OnceFunc(func() {
		if !s.locks.drop(c) {
			return
		}
		if _, err := c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key); err != nil {
			c.Hijack().Close(context.WithoutCancel(ctx))
			return
		}
		c.Release()
	}), true, nil
}

// lockKey is the advisory lock key of a machine of this store's schema.
func (s *Store) lockKey(machineID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("markov/machine:" + s.q.expand("{s}") + ":" + machineID))
	return int64(h.Sum64())
}

// MachineLocked reports whether any session of the database holds
// machineID's lock (package durable's LockProber: a machine's status is
// running while it is held), by looking the advisory lock up in pg_locks.
func (s *Store) MachineLocked(ctx context.Context, machineID string) (bool, error) {
	held, err := s.MachinesLocked(ctx, []string{machineID})
	if err != nil {
		return false, err
	}
	return len(held) == 1, nil
}

// MachinesLocked returns those of machineIDs whose lock some session of
// the database holds, as MachineLocked, in one query. A process that died
// holds none: its session ended, which released its locks.
func (s *Store) MachinesLocked(ctx context.Context, machineIDs []string) ([]string, error) {
	hi, lo := make([]int64, len(machineIDs)), make([]int64, len(machineIDs))
	for i, id := range machineIDs {
		key := uint64(s.lockKey(id))
		hi[i], lo[i] = int64(key>>32), int64(key&0xffffffff)
	}
	rows, err := s.pool.Query(ctx, `SELECT k.i FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS k(hi, lo, i)
		WHERE EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND objsubid = 1
			  AND classid::bigint = k.hi AND objid::bigint = k.lo
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`, hi, lo)
	if err != nil {
		return nil, fmt.Errorf("postgres: are machines locked: %w", err)
	}
	held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var i int64
		err := r.Scan(&i)
		return machineIDs[i-1], err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: are machines locked: %w", err)
	}
	return held, nil
}
