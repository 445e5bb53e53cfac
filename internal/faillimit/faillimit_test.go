package faillimit

import (
	"strconv"
	"testing"
	"time"
)

// The failure limit remembers at most max addresses, and forgets the
// addresses it has forgiven before the ones it is still refusing.
func TestMemoryIsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(2, time.Minute, 5)
	for range 3 {
		l.Fail("attacker", now)
	}
	if w := l.Wait("attacker", now); w != 2*time.Minute {
		t.Fatalf("attacker waits %v, want 2m", w)
	}
	for i := range 1000 {
		l.Fail("client"+strconv.Itoa(i), now)
		if len(l.clients) > l.max {
			t.Fatalf("%d clients remembered, max %d", len(l.clients), l.max)
		}
	}
	if w := l.Wait("attacker", now); w != 2*time.Minute {
		t.Fatalf("attacker forgotten: waits %v, want 2m", w)
	}
	// Forgiven in time, and then forgotten first.
	later := now.Add(3 * time.Minute)
	if w := l.Wait("attacker", later); w != 0 {
		t.Fatalf("attacker still waits %v after 3m", w)
	}
	l.Fail("newcomer", later)
	if len(l.clients) != 1 {
		t.Fatalf("%d clients remembered after everyone was forgiven, want only the newcomer", len(l.clients))
	}
}
