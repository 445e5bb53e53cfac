// Package redelivery answers a second delivery of a state-changing HTTP
// request with the first one's outcome, as webhook senders expect of an
// idempotent receiver. resumehttp (a signed request delivered twice) and
// webhook (a delivery ID seen twice) share it: the first delivery's
// answer is kept with the replay guard's record of its key
// (store.OutcomeKeeper), fleet-wide when the guard is a store's, and a
// redelivery reads it back.
package redelivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/markov-agents/markov/store"
)

// MaxOutcome is the largest answer body kept for redeliveries; the
// outcome of a larger one (a long run's summary) stays unknown to them.
const MaxOutcome = 256 << 10

// Outcome is a first delivery's answer, as the replay guard keeps it.
type Outcome struct {
	Status   int             `json:"status"`
	Location string          `json:"location,omitempty"`
	Body     json.RawMessage `json:"body"`
}

// Recorder is an http.ResponseWriter that records the answer it writes
// through.
type Recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	over   bool // the body outgrew MaxOutcome
}

// NewRecorder returns a Recorder writing through to w.
func NewRecorder(w http.ResponseWriter) *Recorder { return &Recorder{ResponseWriter: w} }

// WriteHeader records and writes the status.
func (w *Recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write records and writes p.
func (w *Recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.over {
		if w.body.Len()+len(p) > MaxOutcome {
			w.over, w.body = true, bytes.Buffer{}
		} else {
			w.body.Write(p)
		}
	}
	return w.ResponseWriter.Write(p)
}

// Status is the status written (0: none yet).
func (w *Recorder) Status() int { return w.status }

// Unwrap returns the underlying ResponseWriter, for
// http.ResponseController.
func (w *Recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Keep keeps the answer rec recorded with guard's record of key, when
// guard is a store.OutcomeKeeper and the answer is worth keeping: not a
// 5xx (whether the request applied is unknown), JSON, and at most
// MaxOutcome bytes. It reports an error of the guard only.
func Keep(ctx context.Context, guard store.ReplayGuard, key string, rec *Recorder) error {
	k, ok := guard.(store.OutcomeKeeper)
	if !ok || rec.status >= http.StatusInternalServerError || rec.over || !json.Valid(rec.body.Bytes()) {
		return nil
	}
	b, err := json.Marshal(Outcome{Status: rec.status, Location: rec.Header().Get("Location"), Body: bytes.TrimSpace(rec.body.Bytes())})
	if err == nil {
		err = k.KeepOutcome(context.WithoutCancel(ctx), key, b)
	}
	return err
}

// Lookup returns the first delivery's outcome kept with guard's record
// of key. found is false while it is not known: the first delivery is
// still being served, its answer was a 5xx or was not kept, or the
// record expired meanwhile. ok is false when guard keeps no outcomes.
func Lookup(ctx context.Context, guard store.ReplayGuard, key string) (o Outcome, found, ok bool, err error) {
	k, ok := guard.(store.OutcomeKeeper)
	if !ok {
		return o, false, false, nil
	}
	raw, err := k.Outcome(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return o, false, true, nil // expired or forgotten since Remember: as good as in progress
	case err != nil:
		return o, false, true, err
	case raw == nil:
		return o, false, true, nil
	}
	if json.Unmarshal(raw, &o) != nil || o.Status == 0 {
		return Outcome{}, false, true, nil
	}
	return o, true, true, nil
}

// GuardOf returns the replay guard of v when it has a
// ReplayGuard() store.ReplayGuard method (*durable.Runner does, on every
// store of this module); nil otherwise.
func GuardOf(v any) store.ReplayGuard {
	if r, ok := v.(interface{ ReplayGuard() store.ReplayGuard }); ok {
		return r.ReplayGuard()
	}
	return nil
}

// Cache is the in-process replay guard (a store.ReplayGuard and a
// store.OutcomeKeeper), for a runner whose store has none: it remembers
// keys in this process only, so a request sent to two handlers is
// accepted by each.
type Cache struct {
	// Now tells the time (time.Now if nil).
	Now       func() time.Time
	mu        sync.Mutex
	seen      map[string]time.Time // key → when it may be forgotten
	outcomes  map[string][]byte    // key → the outcome kept with it
	lastPrune int
}

var (
	_ store.ReplayGuard   = (*Cache)(nil)
	_ store.OutcomeKeeper = (*Cache)(nil)
)

func (c *Cache) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// Remember records key until expiresAt and reports whether it is new.
func (c *Cache) Remember(_ context.Context, key string, expiresAt time.Time) (bool, error) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	if until, ok := c.seen[key]; ok && now.Before(until) {
		return false, nil
	}
	c.seen[key] = expiresAt
	delete(c.outcomes, key)
	if len(c.seen) > 2*c.lastPrune+64 {
		for k, until := range c.seen {
			if !now.Before(until) {
				delete(c.seen, k)
				delete(c.outcomes, k)
			}
		}
		c.lastPrune = len(c.seen)
	}
	return true, nil
}

// KeepOutcome keeps outcome with the live record of key
// (store.OutcomeKeeper).
func (c *Cache) KeepOutcome(_ context.Context, key string, outcome []byte) error {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.seen[key]; ok && now.Before(until) {
		if c.outcomes == nil {
			c.outcomes = map[string][]byte{}
		}
		c.outcomes[key] = outcome
	}
	return nil
}

// Outcome returns the outcome kept with the live record of key
// (store.OutcomeKeeper).
func (c *Cache) Outcome(_ context.Context, key string) ([]byte, error) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if until, ok := c.seen[key]; !ok || !now.Before(until) {
		return nil, store.ErrNotFound
	}
	return c.outcomes[key], nil
}

// Forget deletes the record of key.
func (c *Cache) Forget(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, key)
	delete(c.outcomes, key)
	return nil
}
