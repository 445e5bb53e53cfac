package acp

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/store"
)

// session is one session attached to a connection.
type session struct {
	id string

	mu sync.Mutex
	// running is set while a prompt or a resume runs the machine;
	// stopRun cancels it.
	running bool
	stopRun context.CancelFunc
	// parks are the session's announced parks still pending, by handle,
	// with the history length when they were seen.
	parks map[string]park
	// follows are the parks resolved elsewhere whose runs are being
	// shown, by handle, with how many messages from the resolving one on
	// were shown.
	follows map[string]int
	// announced are the parks a suspended update showed on this
	// connection.
	announced map[string]bool
	// unwatch stops the watcher, if one runs.
	unwatch context.CancelFunc
}

// park is a pending suspension announced with a suspended update.
type park struct {
	call instance.SuspendedCall
}

func newSession(id string) *session {
	return &session{id: id, parks: map[string]park{}, announced: map[string]bool{}, follows: map[string]int{}}
}

// begin marks a run in flight and returns its context; ErrBusy if one
// is.
func (s *session) begin(ctx context.Context) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil, nil, ErrBusy
	}
	ctx, cancel := context.WithCancel(ctx)
	s.running, s.stopRun = true, cancel
	return ctx, func() {
		cancel()
		s.mu.Lock()
		s.running, s.stopRun = false, nil
		s.mu.Unlock()
	}, nil
}

// cancel stops the run in flight, if any.
func (s *session) cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopRun != nil {
		s.stopRun()
	}
}

// park records call as an announced park; false if it was already.
func (s *session) park(call instance.SuspendedCall) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.parks[call.SuspendID]; ok {
		return false
	}
	s.parks[call.SuspendID] = park{call: call}
	return true
}

// markAnnounced notes that a suspended update showed park handle; false
// if one had.
func (s *session) markAnnounced(handle string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.announced[handle] {
		return false
	}
	s.announced[handle] = true
	return true
}

// unpark forgets the park handle; false if it was not one.
func (s *session) unpark(handle string) (park, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.parks[handle]
	delete(s.parks, handle)
	return p, ok
}

// latestPark is the most recent pending park, if any.
func (s *session) latestPark() (instance.SuspendedCall, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var latest instance.SuspendedCall
	found := false
	for _, p := range s.parks {
		if !found || p.call.SuspendedAt.After(latest.SuspendedAt) {
			latest, found = p.call, true
		}
	}
	return latest, found
}

// handles are the pending parks' handles.
func (s *session) handles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.parks))
	for h := range s.parks {
		out = append(out, h)
	}
	return out
}

func (s *session) stopWatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unwatch != nil {
		s.unwatch()
		s.unwatch = nil
	}
}

// watch starts the session's watcher unless it runs: while the session
// has parks, it checks them every WatchInterval for a resume that
// happened elsewhere (a signal, a deadline, another process) and reports
// it with a resumed update and the history it added.
func (c *conn) watch(s *session) {
	s.mu.Lock()
	if s.unwatch != nil {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s.unwatch = cancel
	s.mu.Unlock()
	c.watchers.Add(1)
	go func() {
		defer c.watchers.Done()
		t := time.NewTicker(c.a.cfg.WatchInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			c.check(ctx, s)
		}
	}()
}

// check looks for parks of s resolved elsewhere.
func (c *conn) check(ctx context.Context, s *session) {
	if s.isRunning() {
		return // the run reports its own resumes
	}
	for _, h := range s.handles() {
		sus, err := c.a.cfg.Runner.Suspension(ctx, h)
		if err != nil {
			if ctx.Err() == nil {
				c.a.log.LogAttrs(ctx, slog.LevelWarn, "watch suspension", strAttr("handle", h), strAttr("error", err.Error()))
			}
			continue
		}
		if sus.Status == store.StatusPending {
			continue
		}
		p, ok := s.unpark(h)
		if !ok {
			continue
		}
		cause := CauseExternalEvent
		switch {
		case sus.Status == store.StatusExpired:
			cause = CauseTimeout
		case callEvent(p.call) != "":
			cause = CauseConditionFired
		}
		if err := c.resumed(ctx, s.id, h, cause, false, true, time.Now()); err != nil {
			return
		}
		s.setFollow(h, 0)
	}
	for h, shown := range s.following() {
		if err := c.follow(ctx, s, h, shown); err != nil && ctx.Err() == nil {
			c.a.log.LogAttrs(ctx, slog.LevelWarn, "show a resume from elsewhere", strAttr("handle", h), strAttr("error", err.Error()))
		}
	}
}

func (s *session) setFollow(handle string, shown int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if shown < 0 {
		delete(s.follows, handle)
		return
	}
	s.follows[handle] = shown
}

func (s *session) following() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.follows)
}

func (s *session) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func strAttr(k, v string) slog.Attr { return slog.String(k, v) }
