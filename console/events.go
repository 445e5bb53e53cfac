package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/store"
)

// Changes tells the console that what a page shows may have changed, so
// open pages refresh themselves without a reload.
type Changes interface {
	// Changes yields once each time the inbox (machineID "") or machine
	// machineID may have changed, until ctx is done (it then ends without
	// an error) or the consumer stops. An error ends the sequence.
	Changes(ctx context.Context, machineID string) iter.Seq[error]
}

// StreamLifetime is how long one event stream stays open; the browser
// then reconnects. It is shorter than a server's graceful shutdown
// (cli.ShutdownTimeout), which waits for every open stream.
const StreamLifetime = 25 * time.Second

// DefaultPollInterval is how often PollChanges looks when its Interval is
// zero.
const DefaultPollInterval = 500 * time.Millisecond

// PollChanges is a Changes that polls: the index of pending suspensions
// for the inbox, the stored revision for a machine. It is the stopgap
// until the durable event log's SSE endpoints exist, which will replace
// it behind the same interface.
type PollChanges struct {
	// Runner is polled. Required.
	Runner *durable.Runner
	// Interval between looks (DefaultPollInterval if zero).
	Interval time.Duration
}

// Changes polls every Interval and yields when the fingerprint of what it
// watches differs from the previous one (not for the first look).
func (p *PollChanges) Changes(ctx context.Context, machineID string) iter.Seq[error] {
	return func(yield func(error) bool) {
		every := p.Interval
		if every <= 0 {
			every = DefaultPollInterval
		}
		t := time.NewTicker(every)
		defer t.Stop()
		last := ""
		for {
			fp, err := p.fingerprint(ctx, machineID)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				yield(err)
				return
			}
			if last != "" && fp != last && !yield(nil) {
				return
			}
			last = fp
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

func (p *PollChanges) fingerprint(ctx context.Context, machineID string) (string, error) {
	if machineID != "" {
		_, rev, err := p.Runner.Load(ctx, machineID)
		if errors.Is(err, store.ErrNotFound) {
			return "gone", nil
		}
		return "rev " + strconv.FormatInt(rev, 10), err
	}
	pending, err := p.Runner.Pending(ctx, store.Filter{})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, s := range pending {
		fmt.Fprintf(h, "%s %s\n", s.ID, s.Status)
	}
	return "pending " + hex.EncodeToString(h.Sum(nil)), nil
}

// serveEvents streams "change" events (SSE) for the inbox or ?machine=ID.
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request, _ string) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives a server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	_ = rc.Flush()
	ctx, cancel := context.WithTimeout(r.Context(), StreamLifetime)
	defer cancel()
	for err := range c.changes.Changes(ctx, r.URL.Query().Get("machine")) {
		if err != nil {
			c.log.ErrorContext(r.Context(), "console: change stream failed", "error", err)
			return
		}
		if _, err := fmt.Fprint(w, "event: change\ndata: {}\n\n"); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}
