package bridge

import "time"

// Task is what a task ID names: the machine a protocol call ran, and
// when the call began. A protocol that hands out tasks (the MCP tasks
// extension, A2A) reads the task's state from the machine's own durable
// state, so any process on the same store and secret serves it.
type Task struct {
	MachineID string
	// Created is when the call began (millisecond precision).
	Created time.Time
	// Expires is when the task ID stops being good: Created plus the
	// bridge's TokenTTL.
	Expires time.Time
}

// TaskID returns the ID of the task of a call on machine machineID that
// began at created: signed with the bridge's secret (so it cannot be
// guessed or altered), good for the bridge's TokenTTL.
func (b *Bridge) TaskID(machineID string, created time.Time) (string, Task, error) {
	t := Task{MachineID: machineID, Created: created.Truncate(time.Millisecond)}
	t.Expires = t.Created.Add(b.ttl).Truncate(time.Second)
	id, err := sealWire(b.secret, wireToken{V: tokenVersion, K: kindTask, M: machineID, C: t.Created.UnixMilli(), E: t.Expires.Unix()})
	return id, t, err
}

// OpenTask checks task ID id — its signature, then its expiry — and
// returns the task it names. An ID that is malformed, tampered with,
// signed with another secret or a continuation token fails with
// ErrBadToken, one past its expiry with ErrTokenExpired; both are
// *TokenError.
func (b *Bridge) OpenTask(id string) (Task, error) {
	w, err := openWire(b.secret, id, kindTask)
	if err != nil {
		return Task{}, err
	}
	t := Task{MachineID: w.M, Created: time.UnixMilli(w.C), Expires: time.Unix(w.E, 0)}
	if err := b.expired(t.Expires); err != nil {
		return Task{}, err
	}
	return t, nil
}
