// Package faillimit limits what clients that fail authentication may do:
// a token bucket per client address, drawn on by failures only. The
// signed HTTP API (resumehttp) and the console's sign-in share it.
package faillimit

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limit is a token bucket per client address, drawn on by failed
// authentications only: a client may fail burst times in a row, then once
// per refill; while its bucket is empty the caller refuses its requests
// (Wait). It remembers at most max addresses: a full bucket is the same as
// none, so those are forgotten first, and when every remembered address
// is limited the one whose bucket fills soonest goes. It is safe for
// concurrent use.
type Limit struct {
	burst  float64
	refill time.Duration
	max    int

	mu      sync.Mutex
	clients map[string]*bucket
}

// New returns a Limit: burst failures in a row, then one per refill, for
// at most max addresses remembered.
func New(burst int, refill time.Duration, max int) *Limit {
	return &Limit{burst: float64(burst), refill: refill, max: max, clients: map[string]*bucket{}}
}

// bucket is one address's tokens as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// level returns the tokens of b at now.
func (l *Limit) level(b *bucket, now time.Time) float64 {
	return min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.refill))
}

// Wait reports how long client must wait before its next request is
// heard: zero if it may go on.
func (l *Limit) Wait(client string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.clients[client]
	if !ok {
		return 0
	}
	if t := l.level(b, now); t < 1 {
		return time.Duration(math.Ceil((1 - t) * float64(l.refill)))
	}
	return 0
}

// Fail takes a token from client's bucket.
func (l *Limit) Fail(client string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.clients[client]
	if !ok {
		if len(l.clients) >= l.max {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.clients[client] = b
	}
	b.tokens, b.at = l.level(b, now)-1, now
}

// Forgive gives client back the token of a failure that turned out not
// to be one.
func (l *Limit) Forgive(client string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.clients[client]; ok {
		b.tokens, b.at = min(l.burst, l.level(b, now)+1), now
	}
}

// evict makes room for one more client: it forgets the full buckets, or
// else the fullest one.
func (l *Limit) evict(now time.Time) {
	var fullest string
	most := math.Inf(-1)
	for k, b := range l.clients {
		t := l.level(b, now)
		if t >= l.burst {
			delete(l.clients, k)
			continue
		}
		if t > most {
			fullest, most = k, t
		}
	}
	if len(l.clients) >= l.max {
		delete(l.clients, fullest)
	}
}

// RemoteIP is the IP address of r.RemoteAddr, the client's key when
// nothing better is known.
func RemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
