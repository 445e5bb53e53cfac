package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/markov-agents/markov/store"
)

// Retry is how a runner tries again a run it continues in the
// background that failed ([Config.Retry]): the run after an input it
// accepted (AcceptResume, AcceptCancel, AcceptInvoke), when its model
// is down for one. The input stays applied; a retry is a run of the
// machine with no input, which continues it, after Backoff, doubled at
// each failure up to MaxBackoff. After Attempts failed retries the
// machine is parked when the store is a store.Parker ([Runner.Parked]
// lists it until its next save) and logged. A fleet on PostgreSQL does
// the same with River's retries; this is for a runner on its own (SQLite).
type Retry struct {
	// Attempts is how many retries a failed run gets (0: none, the
	// default).
	Attempts int
	// Backoff is the wait before the first retry (DefaultRetryBackoff
	// if zero); MaxBackoff caps the doubled waits (DefaultRetryMaxBackoff
	// if zero).
	Backoff, MaxBackoff time.Duration
}

// The defaults of Retry's waits.
const (
	DefaultRetryBackoff    = time.Second
	DefaultRetryMaxBackoff = 5 * time.Minute
)

// wait is the backoff before retry n (from 0).
func (rt Retry) wait(n int) time.Duration {
	d, top := rt.Backoff, rt.MaxBackoff
	if d <= 0 {
		d = DefaultRetryBackoff
	}
	if top <= 0 {
		top = DefaultRetryMaxBackoff
	}
	for range n {
		if d >= top/2 {
			return top
		}
		d *= 2
	}
	return min(d, top)
}

// retryLater tries machine id's run again in the background after it
// failed with err, as Config.Retry says; Wait stops it with the other
// background runs.
func (r *Runner) retryLater(ctx context.Context, id string, err error) {
	if r.retry.Attempts <= 0 || ctx.Err() != nil {
		return
	}
	r.log.LogAttrs(ctx, slog.LevelWarn, "a run after an accepted input failed; it is tried again", slog.String("machine", id), slog.String("error", err.Error()))
	r.bg.start(ctx, func(ctx context.Context, _ *background) {
		for n := range r.retry.Attempts {
			t := time.NewTimer(r.retry.wait(n))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			cut, cerr := r.cutShort(ctx, id)
			if cerr != nil || !cut {
				return // gone, running elsewhere, or continued by another input
			}
			if err = r.drain(ctx, id); err == nil || ctx.Err() != nil ||
				errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				return
			}
			r.log.LogAttrs(ctx, slog.LevelWarn, "retry failed", slog.String("machine", id), slog.Int("attempt", n+1), slog.String("error", err.Error()))
		}
		r.park(ctx, id, fmt.Errorf("after %d retries: %w", r.retry.Attempts, err), r.charter.Now())
	})
}

// Retry returns how the runner retries a failed run in the background
// (Config.Retry).
func (r *Runner) Retry() Retry { return r.retry }
