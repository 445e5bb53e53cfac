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
	unlock, ok, err := a.LockMachine(ctx, "m1", true)
	if err != nil || !ok {
		t.Fatalf("a.LockMachine(m1) = %v, %v, want the lock", ok, err)
	}
	for name, s := range map[string]LockingStore{"a": a, "b": b} {
		if held, err := s.MachineLocked(ctx, "m1"); err != nil || !held {
			t.Fatalf("%s.MachineLocked(m1) = %v, %v while a holds it", name, held, err)
		}
		if held, err := s.MachineLocked(ctx, "m2"); err != nil || held {
			t.Fatalf("%s.MachineLocked(m2) = %v, %v, held by no one", name, held, err)
		}
	}
	if _, ok, err := b.LockMachine(ctx, "m1", false); err != nil || ok {
		t.Fatalf("b.LockMachine(m1) without waiting = %v, %v, want not ok: a holds it", ok, err)
	}
	other, ok, err := b.LockMachine(ctx, "m2", false)
	if err != nil || !ok {
		t.Fatalf("b.LockMachine(m2) = %v, %v: locks are per machine", ok, err)
	}
	other()

	got := make(chan func(), 1)
	go func() {
		u, ok, err := b.LockMachine(ctx, "m1", true)
		if err != nil || !ok {
			t.Errorf("b.LockMachine(m1) waiting = %v, %v", ok, err)
		}
		got <- u
	}()
	unlock()
	unlock() // a second call does nothing
	u := <-got
	if u == nil {
		return
	}
	if _, ok, err := a.LockMachine(ctx, "m1", false); err != nil || ok {
		t.Fatalf("a.LockMachine(m1) = %v, %v, want not ok: b holds it", ok, err)
	}
	u()
	if held, err := b.MachineLocked(ctx, "m1"); err != nil || held {
		t.Fatalf("MachineLocked(m1) = %v, %v after the release", held, err)
	}

	if _, ok, err := a.LockMachine(ctx, "m1", true); err != nil || !ok {
		t.Fatalf("a.LockMachine(m1) = %v, %v", ok, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok, err := b.LockMachine(cancelled, "m1", true); !errors.Is(err, context.Canceled) || ok {
		t.Fatalf("b.LockMachine(m1) with a cancelled context = %v, %v, want context.Canceled", ok, err)
	}

	if err := a.Close(); err != nil {
		t.Fatalf("a.Close: %v", err)
	}
	u, ok, err = b.LockMachine(ctx, "m1", true)
	if err != nil || !ok {
		t.Fatalf("b.LockMachine(m1) after a closed = %v, %v, want the lock a held", ok, err)
	}
	u()
}
