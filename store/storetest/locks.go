package storetest

import (
	"context"
	"errors"
	"io"
	"testing"
)

// LockingStore is a store with machine locks shared by every process on
// its database (package durable's Locker and LockProber).
type LockingStore interface {
	LockMachine(ctx context.Context, machineID string, wait bool) (unlock func(), ok bool, err error)
	MachineLocked(ctx context.Context, machineID string) (bool, error)
	io.Closer
}

// Locks checks the machine locks of two stores a and b on one database,
// each standing for a process: a lock a holds is held for b (and seen by
// both through MachineLocked) and not for another machine; a waiter in b
// gets it when a releases it; a cancelled wait gives up with the
// context's error; and closing a, as a process ending would, releases
// what a holds. a is closed when Locks returns.
func Locks(t *testing.T, a, b LockingStore) {
	t.Helper()
	ctx := context.Background()
	unlock := mustLock(t, a, "m1", true)
	for _, s := range []LockingStore{a, b} {
		requireLocked(t, s, "m1", true)
		requireLocked(t, s, "m2", false)
	}
	requireBusy(t, b, "m1")
	mustLock(t, b, "m2", false)() // locks are per machine

	got := make(chan func(), 1)
	go func() {
		u, ok, err := b.LockMachine(ctx, "m1", true)
		if err != nil || !ok {
			t.Errorf("LockMachine(m1) waiting = %v, %v", ok, err)
		}
		got <- u
	}()
	unlock()
	unlock() // a second call does nothing
	u := <-got
	if u == nil {
		return
	}
	requireBusy(t, a, "m1")
	u()
	requireLocked(t, b, "m1", false)

	mustLock(t, a, "m1", true)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok, err := b.LockMachine(cancelled, "m1", true); !errors.Is(err, context.Canceled) || ok {
		t.Fatalf("LockMachine(m1) with a cancelled context = %v, %v, want context.Canceled", ok, err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mustLock(t, b, "m1", true)() // a's lock went with it
}

// mustLock takes machineID's lock in s and returns its release.
func mustLock(t *testing.T, s LockingStore, machineID string, wait bool) func() {
	t.Helper()
	unlock, ok, err := s.LockMachine(context.Background(), machineID, wait)
	if err != nil || !ok {
		t.Fatalf("LockMachine(%s, wait %v) = %v, %v, want the lock", machineID, wait, ok, err)
	}
	return unlock
}

// requireBusy checks that s cannot take machineID's lock, held elsewhere.
func requireBusy(t *testing.T, s LockingStore, machineID string) {
	t.Helper()
	if _, ok, err := s.LockMachine(context.Background(), machineID, false); err != nil || ok {
		t.Fatalf("LockMachine(%s) without waiting = %v, %v, want not ok: another store holds it", machineID, ok, err)
	}
}

// requireLocked checks what s's MachineLocked says of machineID.
func requireLocked(t *testing.T, s LockingStore, machineID string, want bool) {
	t.Helper()
	if held, err := s.MachineLocked(context.Background(), machineID); err != nil || held != want {
		t.Fatalf("MachineLocked(%s) = %v, %v, want %v", machineID, held, err, want)
	}
}
