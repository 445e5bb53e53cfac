package bridge

import (
	"strings"
	"testing"
	"time"
)

// FuzzOpen: no token makes open panic, and one it accepts is a token seal
// signed (re-sealing what it decoded gives the same continuation).
func FuzzOpen(f *testing.F) {
	secret := []byte(strings.Repeat("k", MinSecret))
	good, err := seal(secret, Continuation{MachineID: "m1", SuspendIDs: []string{"s1", "s2"}, Expires: time.Unix(1e9, 0)})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{good, "", ".", "a.b", good + "x", "eyJ2IjoxfQ." + strings.Repeat("A", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := open(secret, token)
		if err != nil {
			return
		}
		again, err := seal(secret, c)
		if err != nil {
			t.Fatalf("re-seal: %v", err)
		}
		c2, err := open(secret, again)
		if err != nil || c2.MachineID != c.MachineID || len(c2.SuspendIDs) != len(c.SuspendIDs) {
			t.Fatalf("round trip: %+v, %v", c2, err)
		}
	})
}

// FuzzOpenTask: no task ID makes openWire panic, a continuation token is
// never taken for a task ID, and an ID it accepts names a valid machine.
func FuzzOpenTask(f *testing.F) {
	secret := []byte(strings.Repeat("k", MinSecret))
	b := &Bridge{secret: secret, ttl: time.Hour, now: func() time.Time { return time.Unix(1e9, 0) }}
	good, _, err := b.TaskID("m1", time.Unix(1e9, 0))
	if err != nil {
		f.Fatal(err)
	}
	token, err := seal(secret, Continuation{MachineID: "m1", Expires: time.Unix(1e9+60, 0)})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{good, token, "", ".", good[:len(good)-1], "eyJ2IjoxLCJrIjoidGFzayJ9." + strings.Repeat("A", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		task, err := b.OpenTask(id)
		if err != nil {
			return
		}
		if id == token || task.MachineID != "m1" {
			t.Fatalf("accepted %q as the task %+v", id, task)
		}
	})
}
