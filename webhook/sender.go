package webhook

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/markov-agents/markov/internal/redelivery"
	"github.com/markov-agents/markov/store"
)

// EventType names an event a subscription receives.
type EventType string

// The events of the store's suspension feed: a suspension's, then a
// machine's (store.MachineChange).
const (
	SuspensionCreated   EventType = "suspension.created"
	SuspensionResolved  EventType = "suspension.resolved"
	SuspensionExpired   EventType = "suspension.expired"
	SuspensionCancelled EventType = "suspension.cancelled"
	// MachineFinished: a run ended with the machine done, nothing
	// pending; the data carries its last answer.
	MachineFinished EventType = "machine.finished"
	// MachineParked: a sweep could not run the machine and parked it
	// (store.Parker); the data carries the errors.
	MachineParked EventType = "machine.parked"
)

// EventTypes are the event types, in the order of the lifecycle.
var EventTypes = []EventType{SuspensionCreated, SuspensionResolved, SuspensionExpired, SuspensionCancelled, MachineFinished, MachineParked}

// Defaults of SenderConfig.
const (
	// DefaultTimeout bounds one attempt (connection, TLS, answer).
	DefaultTimeout = 10 * time.Second
	// DefaultMaxAttempts is how many attempts a delivery gets before it
	// is dead.
	DefaultMaxAttempts = 8
	// DefaultBackoff is the wait before the second attempt; each next
	// wait doubles, up to MaxBackoff.
	DefaultBackoff = 5 * time.Second
	// MaxBackoff caps the wait between two attempts.
	MaxBackoff = time.Hour
	// DefaultKeep is how many deliveries a Sender keeps for Deliveries.
	DefaultKeep = 1000
	// claimWindow is how long a delivery's claim in the replay guard
	// lives: longer than every retry schedule.
	claimWindow = 7 * 24 * time.Hour
)

// Event is the body of a delivery, as Standard Webhooks recommends it:
// a type, when it happened, and its data.
type Event struct {
	Type      EventType `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is a suspension after the change an Event reports, or for
// the machine.* events the machine: its ID, Status "finished" or
// "parked", Revision, and Answer or Errors.
type EventData struct {
	SuspendID string    `json:"suspend_id,omitempty"`
	MachineID string    `json:"machine_id"`
	Status    string    `json:"status"`
	Kind      string    `json:"kind,omitempty"`
	Name      string    `json:"name,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Event     string    `json:"event,omitempty"`
	Deadline  time.Time `json:"deadline,omitzero"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Revision is the machine's revision (machine.* events).
	Revision int64 `json:"revision,omitempty"`
	// Answer is the finished machine's last answer (machine.finished).
	Answer string `json:"answer,omitempty"`
	// Errors are the parked machine's errors, oldest first
	// (machine.parked).
	Errors []string `json:"errors,omitempty"`
	// Cursor is the change's position in the store's suspension feed.
	Cursor int64 `json:"cursor"`
}

// Subscription is a receiver of events.
type Subscription struct {
	// ID names the subscription in delivery IDs: letters, digits, - and
	// _, at most 64. Required.
	ID string `json:"id"`
	// URL is where deliveries are POSTed: http or https. Required.
	URL string `json:"url"`
	// Secret signs the deliveries: "whsec_" + base64. Required.
	Secret string `json:"secret"`
	// Events are the event types sent (every type if empty).
	Events []EventType `json:"events,omitempty"`
}

// DeliveryState is where a delivery stands.
type DeliveryState string

// The states of a delivery.
const (
	// Pending: not attempted yet, or waiting for its next attempt.
	Pending DeliveryState = "pending"
	// Delivered: an attempt was answered 2xx.
	Delivered DeliveryState = "delivered"
	// Dead: its last attempt failed (the dead-letter state); only a
	// manual redelivery tries again.
	Dead DeliveryState = "dead"
)

// Delivery is one event for one subscription and its attempts.
type Delivery struct {
	// ID is the delivery's webhook-id, the same in every attempt and
	// every redelivery, for the receiver to deduplicate.
	ID           string        `json:"id"`
	Subscription string        `json:"subscription"`
	Type         EventType     `json:"type"`
	URL          string        `json:"url"`
	State        DeliveryState `json:"state"`
	Attempts     int           `json:"attempts"`
	// LastStatus is the status of the last answer (0: none), LastError
	// why the last attempt failed.
	LastStatus  int       `json:"last_status,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// Body is what is POSTed: an Event.
	Body json.RawMessage `json:"body"`
	// cursor is the position of its change in the feed.
	cursor int64
}

// SenderConfig configures a Sender. Zero fields take the documented
// defaults.
type SenderConfig struct {
	// Store is the store whose suspension feed is sent: it must keep an
	// event log (store.EventLog; every store of this module does).
	// Required. Its replay guard keeps the sender's position in the feed
	// across restarts. On PostgreSQL (*postgres.Store) the deliveries
	// are River jobs in its schema; on other stores the replay guard
	// claims each delivery and keeps its state (docs/webhooks.md).
	Store store.Store
	// Subscriptions are the receivers. At least one.
	Subscriptions []Subscription
	// AllowPrivate lets deliveries reach loopback, private, link-local
	// and other non-public addresses (refused by default, after name
	// resolution, as a defence against SSRF).
	AllowPrivate bool
	// Timeout bounds one attempt (DefaultTimeout if zero).
	Timeout time.Duration
	// MaxAttempts is how many attempts a delivery gets before it is dead
	// (DefaultMaxAttempts if zero).
	MaxAttempts int
	// Backoff is the wait before the second attempt, doubled for each
	// next one up to MaxBackoff (DefaultBackoff if zero).
	Backoff time.Duration
	// Keep is how many deliveries a process keeps in memory for
	// Deliveries on stores without River, the newest
	// (DefaultKeep if zero).
	Keep int
	// Clock tells the time of the signatures (time.Now if nil).
	Clock func() time.Time
	// Logger receives a record of every attempt (silent if nil).
	Logger *slog.Logger
}

// Sender sends the store's suspension feed — suspensions created and
// ended, machines finished and parked — to the subscriptions, signed
// per Standard Webhooks, with retries. Run it for as long as events
// should go out.
//
// On PostgreSQL (a Store with a pool: *postgres.Store) every delivery is
// a River job, inserted once per delivery ID and worked by any process
// running a Sender on the database: it survives the death of the process
// that was sending it. On other stores the deliveries are attempted by
// the process that claims them, their state kept with the claim: a Sender
// started after a crash takes over those left pending.
type Sender struct {
	log         store.EventLog
	guard       store.ReplayGuard
	subs        []subscription
	client      *http.Client
	timeout     time.Duration
	maxAttempts int
	backoff     time.Duration
	now         func() time.Time
	logger      *slog.Logger
	started     chan struct{}
	out         outbox
}

// outbox keeps the deliveries and attempts them.
type outbox interface {
	// start begins the attempts; stop ends them and waits for those in
	// flight.
	start(ctx context.Context) (stop func(), err error)
	// enqueue adds the deliveries of the feed's changes up to cursor
	// through, skipping those whose ID it has, and returns the position
	// to save: through, or before the first delivery not yet settled if
	// those are not kept elsewhere.
	enqueue(ctx context.Context, ds []*Delivery, through int64) (int64, error)
	list(ctx context.Context, state DeliveryState, limit int) ([]Delivery, error)
	get(ctx context.Context, id string) (Delivery, error)
	redeliver(ctx context.Context, id string) (Delivery, error)
}

type subscription struct {
	Subscription
	key    []byte
	events map[EventType]bool
}

var subID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewSender returns a Sender for cfg, or an error wrapping
// ErrInvalidConfig (with ErrBadSecret or ErrUnsafeTarget for a bad
// secret or URL).
func NewSender(cfg SenderConfig) (*Sender, error) {
	l, ok := cfg.Store.(store.EventLog)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: Store must keep an event log", ErrInvalidConfig)
	case len(cfg.Subscriptions) == 0:
		return nil, fmt.Errorf("%w: Subscriptions: at least one is required", ErrInvalidConfig)
	case cfg.Timeout < 0 || cfg.MaxAttempts < 0 || cfg.Backoff < 0 || cfg.Keep < 0:
		return nil, fmt.Errorf("%w: Timeout, MaxAttempts, Backoff and Keep must not be negative", ErrInvalidConfig)
	}
	s := &Sender{
		log: l, guard: redelivery.GuardOf(cfg.Store),
		timeout:     orDefault(cfg.Timeout, DefaultTimeout),
		maxAttempts: orDefault(cfg.MaxAttempts, DefaultMaxAttempts),
		backoff:     orDefault(cfg.Backoff, DefaultBackoff),
		now:         cfg.Clock, logger: cfg.Logger, started: make(chan struct{}),
	}
	s.client = newClient(s.timeout, cfg.AllowPrivate)
	if g, ok := cfg.Store.(store.ReplayGuard); ok && s.guard == nil {
		s.guard = g
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.guard == nil {
		s.guard = &redelivery.Cache{Now: s.now}
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	for _, sub := range cfg.Subscriptions {
		bad := func(err error) error { return fmt.Errorf("%w: subscription %s: %w", ErrInvalidConfig, sub.ID, err) }
		if !subID.MatchString(sub.ID) || seen[sub.ID] {
			return nil, bad(errors.New("id must be 1 to 64 letters, digits, - or _, and unique"))
		}
		seen[sub.ID] = true
		if err := checkURL(sub.URL); err != nil {
			return nil, bad(err)
		}
		key, err := ParseSecret(sub.Secret)
		if err != nil {
			return nil, bad(err)
		}
		ss := subscription{Subscription: sub, key: key, events: map[EventType]bool{}}
		for _, e := range sub.Events {
			if !slices.Contains(EventTypes, e) {
				return nil, bad(fmt.Errorf("unknown event %q (known: %v)", e, EventTypes))
			}
			ss.events[e] = true
		}
		s.subs = append(s.subs, ss)
	}
	if pg, ok := cfg.Store.(pgStore); ok {
		o, err := newRiverOutbox(s, pg, s.timeout)
		if err != nil {
			return nil, err
		}
		s.out = o
	} else {
		s.out = newMemOutbox(s, orDefault(cfg.Keep, DefaultKeep))
	}
	return s, nil
}

// subscription returns the subscription id, or nil.
func (s *Sender) subscription(id string) *subscription {
	for i := range s.subs {
		if s.subs[i].ID == id {
			return &s.subs[i]
		}
	}
	return nil
}

// Started is closed once Run knows its position in the feed: every
// change committed after that is sent.
func (s *Sender) Started() <-chan struct{} { return s.started }

// positionKey is the replay guard's record of the sender's position in
// the feed (the cursor of the last change handed to the subscriptions).
const positionKey = "webhook-out:position"

// feedBatch is how many changes are read at a time.
const feedBatch = 500

// Run sends the feed until ctx ends, then waits for the attempts in
// flight and returns nil. It starts after the position a previous Run on
// the store saved, or — the first time — at the end of the feed: what
// happened before webhooks were configured is not sent.
func (s *Sender) Run(ctx context.Context) error {
	stop, err := s.out.start(ctx)
	if err != nil {
		return err
	}
	defer stop()
	sub, err := s.log.Subscribe(ctx, "")
	if err != nil {
		return fmt.Errorf("webhook: subscribe to the suspension feed: %w", err)
	}
	defer sub.Close()
	cursor, saved, err := s.position(ctx)
	if err != nil {
		return err
	}
	if !saved { // what happens from now on goes out, even after a crash
		s.savePosition(ctx, cursor)
	}
	close(s.started)
	for {
		for {
			changes, err := s.log.ReadSuspensionChanges(ctx, cursor, feedBatch)
			if err != nil {
				return s.ended(ctx, fmt.Errorf("webhook: read the suspension feed: %w", err))
			}
			var ds []*Delivery
			for _, c := range changes {
				ds = append(ds, s.deliveriesOf(c)...)
			}
			if len(changes) > 0 {
				cursor = changes[len(changes)-1].Cursor
				pos, err := s.out.enqueue(ctx, ds, cursor)
				if err != nil {
					return s.ended(ctx, err)
				}
				s.savePosition(ctx, pos)
			}
			if len(changes) < feedBatch {
				break
			}
		}
		if _, err := sub.Next(ctx); err != nil {
			return s.ended(ctx, err)
		}
	}
}

// ended is nil when ctx ended, else err.
func (s *Sender) ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// position is the saved position (saved true), or the end of the feed.
func (s *Sender) position(ctx context.Context) (cursor int64, saved bool, err error) {
	if k, ok := s.guard.(store.OutcomeKeeper); ok {
		raw, err := k.Outcome(ctx, positionKey)
		if err == nil && len(raw) == 8 {
			return int64(binary.BigEndian.Uint64(raw)), true, nil
		}
	}
	for {
		changes, err := s.log.ReadSuspensionChanges(ctx, cursor, feedBatch)
		if err != nil {
			return 0, false, fmt.Errorf("webhook: read the suspension feed: %w", err)
		}
		if len(changes) > 0 {
			cursor = changes[len(changes)-1].Cursor
		}
		if len(changes) < feedBatch {
			return cursor, false, nil
		}
	}
}

// savePosition keeps cursor as the sender's position, even as ctx ends
// (Run stopping): the changes up to it are claimed already, and a
// position lost would skip what happens until the next start. Reading
// a change again is harmless: its deliveries' claims stand.
func (s *Sender) savePosition(ctx context.Context, cursor int64) {
	k, ok := s.guard.(store.OutcomeKeeper)
	if !ok {
		return
	}
	ctx = context.WithoutCancel(ctx)
	b := binary.BigEndian.AppendUint64(nil, uint64(cursor))
	_, err := s.guard.Remember(ctx, positionKey, s.now().AddDate(100, 0, 0))
	if err == nil {
		err = k.KeepOutcome(ctx, positionKey, b)
	}
	if err != nil {
		s.logger.LogAttrs(ctx, slog.LevelWarn, "webhook: save the position in the feed", slog.String("error", err.Error()))
	}
}

// eventOf is the Event of change c.
func eventOf(c store.SuspensionChange) Event {
	if m := c.Machine; m != nil {
		return Event{Type: EventType("machine." + string(m.Event)), Timestamp: c.At, Data: EventData{MachineID: c.Suspension.MachineID,
			Status: string(m.Event), Revision: m.Revision, Answer: m.Answer, Errors: m.Errors, Cursor: c.Cursor}}
	}
	sus := c.Suspension
	typ := EventType("suspension." + string(sus.Status))
	if sus.Status == store.StatusPending {
		typ = SuspensionCreated
	}
	return Event{Type: typ, Timestamp: c.At, Data: EventData{SuspendID: sus.ID, MachineID: sus.MachineID, Status: string(sus.Status),
		Kind: sus.Kind, Name: sus.Name, Reason: sus.Reason, Event: sus.Event, Deadline: sus.Deadline, CreatedAt: sus.CreatedAt, Cursor: c.Cursor}}
}

// deliveriesOf are the deliveries of change c: one per subscription
// whose filter takes its event.
func (s *Sender) deliveriesOf(c store.SuspensionChange) []*Delivery {
	ev := eventOf(c)
	body, err := json.Marshal(ev)
	if err != nil {
		return nil // only times out of range; the store keeps none
	}
	var ds []*Delivery
	for i := range s.subs {
		sub := &s.subs[i]
		if len(sub.events) > 0 && !sub.events[ev.Type] {
			continue
		}
		ds = append(ds, &Delivery{ID: "msg_" + strconv.FormatInt(c.Cursor, 10) + "_" + sub.ID, Subscription: sub.ID, Type: ev.Type,
			URL: sub.URL, State: Pending, CreatedAt: s.now(), Body: body, cursor: c.Cursor})
	}
	return ds
}

// wait is the wait after attempt n (1 for the first) failed: Backoff,
// doubled per attempt, up to MaxBackoff.
func (s *Sender) wait(n int) time.Duration {
	return min(s.backoff<<min(max(n-1, 0), 20), MaxBackoff)
}

// logAttempt records attempt n of delivery id.
func (s *Sender) logAttempt(ctx context.Context, id, url string, n, status int, err error) {
	level, msg := slog.LevelInfo, ""
	if err != nil {
		level, msg = slog.LevelWarn, err.Error()
	}
	s.logger.LogAttrs(ctx, level, "webhook: delivery attempt", slog.String("delivery_id", id), slog.String("url", url),
		slog.Int("attempt", n), slog.Int("status", status), slog.String("error", msg))
}

// answered precedes the status in the error of an attempt answered
// other than 2xx.
const answered = "answered "

// post sends one attempt of delivery id and returns the answer's
// status; an error for anything but 2xx.
func (s *Sender) post(ctx context.Context, sub *subscription, id string, body []byte) (int, error) {
	now := s.now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrDeliveryFailed, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "markov-webhooks")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(sub.key, id, now, body))
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrUnsafeTarget) {
			return 0, fmt.Errorf("%w: %s", ErrUnsafeTarget, sub.URL)
		}
		return 0, fmt.Errorf("%w: %w", ErrDeliveryFailed, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%w: %s%d", ErrDeliveryFailed, answered, resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// Deliveries returns the deliveries, newest first, those in state if it
// is not empty, at most limit (no cap if limit <= 0; on PostgreSQL at
// most 10000).
func (s *Sender) Deliveries(ctx context.Context, state DeliveryState, limit int) ([]Delivery, error) {
	return s.out.list(ctx, state, limit)
}

// Delivery returns the delivery id, or an error wrapping
// ErrUnknownDelivery.
func (s *Sender) Delivery(ctx context.Context, id string) (Delivery, error) {
	return s.out.get(ctx, id)
}

// Redeliver attempts delivery id once more, whatever its state, with the
// same ID and body. Without River it returns the delivery after the
// attempt; on PostgreSQL the delivery's job is made available again (with
// one more attempt if it had used them all), and it returns it pending.
func (s *Sender) Redeliver(ctx context.Context, id string) (Delivery, error) {
	return s.out.redeliver(ctx, id)
}
