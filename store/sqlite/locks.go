package sqlite

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"time"
)

// locksSuffix names the sidecar file, beside the database, whose byte
// ranges are the machines' locks.
const locksSuffix = "-locks"

// maxLockPoll is the longest pause between two tries of a lock another
// process holds: the system offers no wait that a context can cancel.
const maxLockPoll = 50 * time.Millisecond

// errLocksClosed is a lock asked of a closed store.
var errLocksClosed = errors.New("store closed")

// machineLocks are the store's machine locks (package durable's Locker):
// one byte of the sidecar file (the database's path plus locksSuffix) per
// machine, locked with an open file description lock (Linux's
// F_OFD_SETLK), so that stores exclude each other whether they are in
// one process or in several, and the system releases a lock when its
// holder's process ends, however it ends. Within the store, held keeps
// the machines it holds, and their waiters wait on the channel closed at
// the release.
type machineLocks struct {
	readOnly bool
	mu       sync.Mutex
	f        *os.File // nil once closed, or when the file could not be opened
	err      error    // why f is nil
	held     map[int64]chan struct{}
}

// openMachineLocks opens the sidecar of the database at path, creating
// it with the database file's permissions. A read-only store opens it for
// reading, to probe (MachineLocked) but not to lock; without it (no
// writer of this version opened the database, or it cannot be read), the
// store sees no lock held.
func openMachineLocks(path string, readOnly bool) *machineLocks {
	l := &machineLocks{readOnly: readOnly, held: map[int64]chan struct{}{}}
	name := path + locksSuffix
	if readOnly {
		if f, err := os.Open(name); err == nil {
			l.f = f
		} else {
			l.err = err
		}
		return l
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	l.f, l.err = os.OpenFile(name, os.O_RDWR|os.O_CREATE, perm)
	return l
}

// lockOffset is machineID's byte in the sidecar file: 62 bits of a hash,
// so that two machines share a lock with negligible odds.
func lockOffset(machineID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("markov/machine:" + machineID))
	return int64(h.Sum64() & (1<<62 - 1))
}

// LockMachine takes the exclusive lock of machineID, shared by every
// store on the database file — in this process or in any other on the
// host — and returns the function that releases it (package durable's
// Locker: durable.Runner holds it for the whole of a run, so at most one
// process runs a machine at a time). The system releases the lock when
// the process that holds it ends, however it ends, and Close releases
// the store's. With wait false a lock held elsewhere returns ok false at
// once; waiting for another process's lock tries again after pauses that
// grow to 50 ms, until ctx is done.
//
// The lock is an open file description lock on Linux. Elsewhere the store
// locks nothing across processes (a lock held in another process is not
// seen), and durable's lock within the process is all there is.
func (s *Store) LockMachine(ctx context.Context, machineID string, wait bool) (unlock func(), ok bool, err error) {
	unlock, ok, err = s.locks.lock(ctx, lockOffset(machineID), wait)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: lock machine %q: %w", machineID, err)
	}
	return unlock, ok, nil
}

// MachineLocked reports whether a store on the database, in this process
// or another, holds machineID's lock (package durable's LockProber: a
// machine's status is running while it is held).
func (s *Store) MachineLocked(ctx context.Context, machineID string) (bool, error) {
	held, err := s.locks.locked(lockOffset(machineID))
	if err != nil {
		return false, fmt.Errorf("sqlite: is machine %q locked: %w", machineID, err)
	}
	return held, nil
}

func (l *machineLocks) lock(ctx context.Context, off int64, wait bool) (func(), bool, error) {
	pause := time.Millisecond
	for {
		released, ok, err := l.try(off)
		if ok || err != nil || !wait {
			return released, ok, err
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if ch := l.waitFor(off); ch != nil {
			// Held by this store: its release wakes the wait.
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
			pause = min(2*pause, maxLockPoll)
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		}
	}
}

// try takes the lock at off if no one holds it, without waiting.
func (l *machineLocks) try(off int64) (func(), bool, error) {
	if l.readOnly {
		return nil, false, ErrReadOnly
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil, false, l.unavailable()
	}
	if _, held := l.held[off]; held {
		return nil, false, nil
	}
	if ok, err := lockRange(l.f, off); !ok || err != nil {
		return nil, false, err
	}
	ch := make(chan struct{})
	l.held[off] = ch
	return sync.OnceFunc(func() { l.release(off, ch) }), true, nil
}

// waitFor returns the channel closed when this store releases the lock at
// off, or nil if it does not hold it.
func (l *machineLocks) waitFor(off int64) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[off]
}

// release gives up the lock at off, if ch is still its holder's (a store
// closed since released it).
func (l *machineLocks) release(off int64, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[off] != ch {
		return
	}
	// An unlock that fails leaves the range locked until Close; there
	// is no one to tell.
	_ = unlockRange(l.f, off)
	delete(l.held, off)
	close(ch)
}

func (l *machineLocks) locked(off int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, held := l.held[off]; held {
		return true, nil
	}
	if l.f == nil {
		if l.readOnly && l.err != nil {
			return false, nil // no sidecar: no writer ever locked
		}
		return false, l.unavailable()
	}
	return rangeLocked(l.f, off)
}

func (l *machineLocks) unavailable() error {
	if l.err != nil {
		return fmt.Errorf("locks file: %w", l.err)
	}
	return errLocksClosed
}

// close releases every lock the store holds and wakes their waiters.
func (l *machineLocks) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for off, ch := range l.held {
		close(ch)
		delete(l.held, off)
	}
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f, l.err = nil, nil
	return err
}
