package sqlite

import (
	"errors"
	"os"
	"sync"
)

// watchSuffix names the sidecar file, beside the database, whose locks
// tell publishers whether any process watches a machine.
const watchSuffix = "-watch"

// watchers tells a publisher whether a machine subscription is open on
// the database, in this process or another: every store with one open
// holds a shared lock on the sidecar file (the database's path plus
// watchSuffix) until its last one closes, and a publisher first tries the
// exclusive lock, without waiting, on a descriptor of its own. Nobody
// watching, a live payload has nobody to reach: the store neither writes
// it nor commits anything for it. The locks are the system's (flock):
// they go with the process that holds them, however it ends.
type watchers struct {
	// hold carries this store's shared lock while n machine subscriptions
	// are open; probe tries the exclusive lock (nil: unknown, so a
	// publisher assumes a watcher). mu guards both and n.
	mu          sync.Mutex
	n           int
	hold, probe *os.File
}

// openWatchers opens the sidecar of the database at path — creating it,
// with the database file's permissions, unless readOnly — twice: one
// descriptor to hold the shared lock, one to probe. Without the file (a
// read-only store of a database no writer of this version opened, or a
// directory the process may not write), watchers is inert: its
// subscriptions register nowhere, and its publishers always publish.
func openWatchers(path string, readOnly bool) *watchers {
	w := &watchers{}
	name := path + watchSuffix
	if !readOnly {
		perm := os.FileMode(0o644)
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
		}
		// O_RDONLY suffices: the lock does not depend on the mode a
		// descriptor was opened with.
		if f, err := os.OpenFile(name, os.O_RDONLY|os.O_CREATE, perm); err == nil {
			f.Close()
		}
	}
	var err error
	if w.hold, err = os.Open(name); err != nil {
		w.hold = nil
		return w
	}
	if !readOnly {
		if w.probe, err = os.Open(name); err != nil {
			w.probe = nil
		}
	}
	return w
}

// watch registers an open machine subscription.
func (w *watchers) watch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 && w.hold != nil {
		// Best effort, like the live payloads: a lock that cannot be
		// taken leaves the subscription with the log only.
		_ = lockShared(w.hold)
	}
	w.n++
}

// unwatch unregisters a closed machine subscription.
func (w *watchers) unwatch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n--; w.n == 0 && w.hold != nil {
		_ = unlock(w.hold)
	}
}

// watched reports whether a machine subscription may be open on the
// database: true unless the probe takes the exclusive lock, which it then
// releases. A subscription of this store counts too (its shared lock is
// held through another descriptor).
func (w *watchers) watched() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.probe == nil {
		return true
	}
	free, err := tryLockExclusive(w.probe)
	if err != nil {
		return true
	}
	if free {
		_ = unlock(w.probe)
	}
	return !free
}

// close closes the descriptors, which releases their locks.
func (w *watchers) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, f := range []*os.File{w.hold, w.probe} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	w.hold, w.probe = nil, nil
	return errors.Join(errs...)
}
