package acp

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
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
	// unwatch stops the watcher, if one runs; wake asks it for a check.
	unwatch context.CancelFunc
	wake    chan struct{}
	// seq is the sequence number of the last event of the machine's log
	// that a watcher read, or of the last entry the log had when the
	// session was loaded on this connection (open), if later: the next
	// watcher reads on from there. A check made after seq was read sees
	// what every event up to it did.
	seq int64
}

// park is a pending suspension announced with a suspended update.
type park struct {
	call instance.SuspendedCall
}

func newSession(id string) *session {
	return &session{id: id, parks: map[string]park{}, announced: map[string]bool{}, follows: map[string]int{},
		wake: make(chan struct{}, 1)}
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
		// The watcher skips its checks while a run is in flight: one
		// now sees what happened meanwhile elsewhere.
		s.poke()
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

// poke asks the watcher, if one runs, for a check; a poke it has not
// taken yet stands for this one too.
func (s *session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// watch starts the session's watcher unless it runs or the session has
// nothing to watch: while the session has parks (or follows the run of
// one resolved elsewhere), it checks them for a resume that happened
// elsewhere (a signal, a deadline, another process) and reports it with
// a resumed update and the history it added. It checks when the
// machine's event log says that a suspension was resolved or the run
// moved on, and after each run of the session on this connection; a
// store without an event log (durable.ErrUnsupported) is checked every
// WatchInterval instead.
func (c *conn) watch(s *session) {
	s.mu.Lock()
	if s.unwatch != nil || len(s.parks) == 0 && len(s.follows) == 0 {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s.unwatch = cancel
	s.mu.Unlock()
	c.watchers.Add(1)
	go func() {
		defer c.watchers.Done()
		if !c.a.cfg.Runner.CanWatch() {
			c.poll(ctx, s)
			return
		}
		// Read before the first check, which then sees what the log
		// holds up to there; the feed reads what comes after.
		from := s.logSeq()
		feed, stopFeed := context.WithCancel(ctx)
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			c.readFeed(feed, s, from)
		}()
		defer func() { stopFeed(); <-fed }()
		c.checkOnWake(ctx, s, nil)
	}()
}

// poll checks s every WatchInterval, and when poked, until its watch
// ends: the watcher of a store without an event log.
func (c *conn) poll(ctx context.Context, s *session) {
	t := time.NewTicker(c.a.cfg.WatchInterval)
	defer t.Stop()
	c.checkOnWake(ctx, s, t.C)
}

// checkOnWake checks s at once, then whenever it is poked or tick
// ticks, until ctx is done or s has nothing left to watch. A check that
// failed is made again after a pause that doubles up to retryMax.
func (c *conn) checkOnWake(ctx context.Context, s *session, tick <-chan time.Time) {
	retry := retryFirst
	for {
		var again <-chan time.Time
		if c.check(ctx, s) {
			retry = retryFirst
		} else {
			again, retry = time.After(retry), min(2*retry, retryMax)
		}
		if s.watchDone(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-tick:
		case <-again:
		}
	}
}

// watchDone ends the watch of ctx, and reports true, when it was stopped
// or s has no park left to watch nor a run to follow; a park recorded
// later starts a new watch.
func (s *session) watchDone(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return true // stopped: s.unwatch is no longer this watch's
	}
	if len(s.parks) > 0 || len(s.follows) > 0 {
		return false
	}
	s.unwatch()
	s.unwatch = nil
	return true
}

// The watcher's pauses before it makes again a check, or a subscription
// to the machine's event log, that failed: retryFirst, doubling up to
// retryMax.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

// readFeed pokes s whenever its machine's event log records that a
// suspension was resolved (resumed, expired, cancelled) or a step ended,
// until ctx is done. It reads the log after from, and after a failure
// after s.logSeq() (session.seq): the last event read, or the end of
// the log at the session's last load, not the start of a long log. Each
// such number is read before a check (the watch's first, or the one a
// retry pokes for), which sees what every event up to it did; the feed
// reads every event after it — logged before the subscription as after
// — and a check then shows what it changed, whatever changed it. A
// failed subscription is made again after a pause (retryFirst, doubling
// up to retryMax).
func (c *conn) readFeed(ctx context.Context, s *session, from int64) {
	retry := retryFirst
	for {
		for e, err := range c.a.cfg.Runner.Watch(ctx, s.id, from) {
			if err != nil {
				if ctx.Err() == nil {
					c.a.log.LogAttrs(ctx, slog.LevelWarn, "watch session events", strAttr("session", s.id), strAttr("error", err.Error()))
				}
				break
			}
			retry = retryFirst
			if e.Live {
				continue // the log records it at the next save
			}
			s.readTo(e.Seq)
			switch e.Kind {
			case machine.EventResumed, machine.EventExpired, machine.EventCancelled, machine.EventStep:
				s.poke()
			}
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(2*retry, retryMax)
		from = s.logSeq()
		s.poke() // what the failure hid is read again; check anyway
	}
}

// logSeq is where a watcher of s reads the machine's log on from
// (session.seq).
func (s *session) logSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// readTo notes that a watcher of s read the log up to seq, or that s
// loaded the machine as it was when seq was the log's last entry.
func (s *session) readTo(seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = max(s.seq, seq)
}

// check looks for parks of s resolved elsewhere; false if the store or
// the client failed it, and it is to be made again.
func (c *conn) check(ctx context.Context, s *session) bool {
	if s.isRunning() {
		return true // the run reports its own resumes
	}
	ok := true
	for _, h := range s.handles() {
		sus, err := c.a.cfg.Runner.Suspension(ctx, h)
		if err != nil {
			if ctx.Err() == nil {
				c.a.log.LogAttrs(ctx, slog.LevelWarn, "watch suspension", strAttr("handle", h), strAttr("error", err.Error()))
			}
			ok = false
			continue
		}
		if sus.Status == store.StatusPending {
			continue
		}
		p, parked := s.unpark(h)
		if !parked {
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
			return false
		}
		s.setFollow(h, 0)
	}
	for h, shown := range s.following() {
		if err := c.follow(ctx, s, h, shown); err != nil {
			if ctx.Err() == nil {
				c.a.log.LogAttrs(ctx, slog.LevelWarn, "show a resume from elsewhere", strAttr("handle", h), strAttr("error", err.Error()))
			}
			ok = false
		}
	}
	return ok
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
