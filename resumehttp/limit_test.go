package resumehttp

import (
	"strconv"
	"testing"
	"time"
)

// The failure limit remembers at most max addresses, and forgets the
// addresses it has forgiven before the ones it is still refusing.
func TestFailureLimitMemoryIsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := failureLimit{burst: 2, refill: time.Minute, max: 5, clients: map[string]*bucket{}}
	for range 3 {
		l.fail("attacker", now)
	}
	if w := l.wait("attacker", now); w != 2*time.Minute {
		t.Fatalf("attacker waits %v, want 2m", w)
	}
	for i := range 1000 {
		l.fail("client"+strconv.Itoa(i), now)
		if len(l.clients) > l.max {
			t.Fatalf("%d clients remembered, max %d", len(l.clients), l.max)
		}
	}
	if w := l.wait("attacker", now); w != 2*time.Minute {
		t.Fatalf("attacker forgotten: waits %v, want 2m", w)
	}
	// Forgiven in time, and then forgotten first.
	later := now.Add(3 * time.Minute)
	if w := l.wait("attacker", later); w != 0 {
		t.Fatalf("attacker still waits %v after 3m", w)
	}
	l.fail("newcomer", later)
	if len(l.clients) != 1 {
		t.Fatalf("%d clients remembered after everyone was forgiven, want only the newcomer", len(l.clients))
	}
}
