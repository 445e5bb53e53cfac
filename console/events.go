package console

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
)

// StreamLifetime is how long one event stream stays open; the browser
// then reconnects, resuming after the last event it received
// (Last-Event-ID). It is shorter than a server's graceful shutdown
// (cli.ShutdownTimeout), which waits for every open stream.
const StreamLifetime = 25 * time.Second

// streams is the console's own resumehttp handler, which serves the event
// streams the pages follow: GET /suspensions/events and GET
// /machines/{id}/events, in-process. The console signs each request to it
// with a key of its own, once the person's session checks out, so a
// browser needs no HMAC secret.
type streams struct {
	h   *resumehttp.Handler
	key []byte
}

func newStreams(r *durable.Runner, cfg Config) (*streams, error) {
	key := []byte(rand.Text() + rand.Text()) // 52 random base32 characters
	h, err := resumehttp.New(resumehttp.Config{Runner: r, Secret: key, Clock: cfg.Now, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("console: event streams: %w", err)
	}
	return &streams{h: h, key: key}, nil
}

// serveEvents streams what a page follows as server-sent events: the
// suspension feed for the inbox (each event named by the suspension's new
// status, its id the feed cursor) or, with ?machine=ID, that machine's
// events (named by kind, the id of a logged one its sequence number, the
// data a durable.Event as JSON). ?after=N, or the Last-Event-ID a
// reconnecting browser sends, resumes after N.
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request, _ string) {
	q := r.URL.Query()
	path := "/suspensions/events"
	if id := q.Get("machine"); id != "" {
		if !store.ValidID(id) {
			http.Error(w, "console: unknown machine", http.StatusNotFound)
			return
		}
		path = "/machines/" + url.PathEscape(id) + "/events"
	}
	if after := q.Get("after"); after != "" {
		path += "?" + url.Values{"after": {after}}.Encode()
	}
	ctx, cancel := context.WithTimeout(r.Context(), StreamLifetime)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, http.NoBody)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		req.Header.Set("Last-Event-ID", id)
	}
	req.RemoteAddr = r.RemoteAddr
	resumehttp.SignRequest(c.streams.key, req, nil, c.now())
	c.streams.h.ServeHTTP(w, req)
}
