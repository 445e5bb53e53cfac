package a2a

// This file sends the server's push notifications from an outbox in the
// store: the SDK hands each notification to the outbox, which keeps it
// as a record, and Server.Run delivers it, with retries, in whichever
// process serving the store runs then.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/markov-agents/markov/store"
)

// Defaults of the push notifications a Server sends.
const (
	// DefaultPushAttempts is how many times a notification is tried
	// before it is dropped.
	DefaultPushAttempts = 8
	// DefaultPushBackoff is the wait before the second attempt; each
	// next one waits twice as long, up to maxPushBackoff.
	DefaultPushBackoff = time.Second
	// DefaultRunInterval is how often Run looks at the outbox and at the
	// tasks waiting on decisions made elsewhere, besides when this
	// process adds to the outbox.
	DefaultRunInterval = time.Second
	maxPushBackoff     = 10 * time.Minute
	// pushTimeout bounds one attempt.
	pushTimeout = 10 * time.Second
	// pushTokenHeader is the header the SDKs read a notification's token
	// from (the Go SDK's; the JavaScript SDK's receivers read
	// X-A2A-Notification-Token).
	pushTokenHeader = "A2A-Notification-Token"
)

// outboxKind is the record kind of the notifications not delivered yet.
const outboxKind = "a2a.outbox"

// outboxEntry is one notification for one push config.
type outboxEntry struct {
	Config *a2a.PushConfig `json:"config"`
	// Body is what is POSTed: an A2A StreamResponse.
	Body      json.RawMessage `json:"body"`
	Attempts  int             `json:"attempts,omitempty"`
	Next      time.Time       `json:"next,omitzero"`
	LastError string          `json:"lastError,omitempty"`
}

// outbox is the server's push.Sender: it keeps every notification in
// the store, and deliver sends what is due.
type outbox struct {
	records     store.RecordKeeper
	client      *http.Client
	allowed     bool // private addresses allowed
	attempts    int
	backoff     time.Duration
	logger      *slog.Logger
	now         func() time.Time
	added       chan struct{} // poked when this process adds an entry
	checkTarget func(string) error
}

var _ push.Sender = (*outbox)(nil)

// SendPush implements push.Sender: the notification is kept in the
// store, to be delivered by Run. A target the SSRF check refuses is
// logged and dropped.
func (o *outbox) SendPush(ctx context.Context, cfg *a2a.PushConfig, event a2a.Event) error {
	if cfg == nil {
		return nil
	}
	if err := o.checkTarget(cfg.URL); err != nil {
		o.logger.Warn("a2a push notification refused", "task", cfg.TaskID, "url", cfg.URL, "err", err)
		return nil
	}
	body, err := json.Marshal(a2a.StreamResponse{Event: event})
	if err != nil {
		return fmt.Errorf("a2a: push notification: %w", err)
	}
	data, err := json.Marshal(outboxEntry{Config: cfg, Body: body})
	if err != nil {
		return fmt.Errorf("a2a: push notification: %w", err)
	}
	// The key orders a task's notifications for one config by the time
	// they were made (the random tail tells apart those of one instant).
	key := fmt.Sprintf("%s/%s/%020d-%s", cfg.TaskID, cfg.ID, o.now().UnixNano(), rand.Text()[:8])
	if _, err := o.records.PutRecord(ctx, store.Record{Kind: outboxKind, Key: key, Data: data}, 0); err != nil {
		return fmt.Errorf("a2a: keep a push notification: %w", err)
	}
	select {
	case o.added <- struct{}{}:
	default:
	}
	return nil
}

// deliver attempts the notifications that are due, oldest first per
// task and config: one still waiting for its next attempt holds the
// later ones back. An attempt is claimed by writing its record first,
// so that of several processes on the store one sends it. A
// notification delivered (2xx) is deleted; one that failed its last
// attempt, or whose target is refused, is logged and deleted.
func (o *outbox) deliver(ctx context.Context) {
	rs, err := o.records.ListRecords(ctx, outboxKind, "")
	if err != nil {
		o.logger.Warn("a2a push notifications: read the outbox", "err", err)
		return
	}
	held := map[string]bool{}
	for _, r := range rs {
		stream := r.Key[:strings.LastIndexByte(r.Key, '/')+1]
		if held[stream] || ctx.Err() != nil {
			continue
		}
		var e outboxEntry
		if err := json.Unmarshal(r.Data, &e); err != nil || e.Config == nil {
			o.logger.Warn("a2a push notifications: an unreadable entry dropped", "key", r.Key, "err", err)
			_ = o.records.DeleteRecord(ctx, outboxKind, r.Key)
			continue
		}
		if e.Next.After(o.now()) {
			held[stream] = true
			continue
		}
		e.Attempts++
		e.Next = o.now().Add(min(o.backoff<<min(e.Attempts-1, 20), maxPushBackoff))
		data, _ := json.Marshal(e) // it decoded from JSON
		v, err := o.records.PutRecord(ctx, store.Record{Kind: outboxKind, Key: r.Key, Data: data}, r.Version)
		if err != nil {
			held[stream] = true // another process sends it, or the store failed: later
			continue
		}
		err = o.post(ctx, e.Config, e.Body)
		switch {
		case err == nil:
			err = o.records.DeleteRecord(ctx, outboxKind, r.Key)
		case errors.Is(err, ErrForbiddenAddress) || e.Attempts >= o.attempts:
			o.logger.Error("a2a push notification dropped", "task", e.Config.TaskID, "url", e.Config.URL, "attempts", e.Attempts, "err", err)
			err = o.records.DeleteRecord(ctx, outboxKind, r.Key)
		default:
			o.logger.Warn("a2a push notification failed", "task", e.Config.TaskID, "url", e.Config.URL, "attempt", e.Attempts, "next", e.Next, "err", err)
			e.LastError = err.Error()
			data, _ = json.Marshal(e)
			_, err = o.records.PutRecord(ctx, store.Record{Kind: outboxKind, Key: r.Key, Data: data}, v)
			held[stream] = true
		}
		if err != nil {
			o.logger.Warn("a2a push notifications: update the outbox", "key", r.Key, "err", err)
		}
	}
}

// post POSTs body to cfg's URL with its token and credentials; an error
// for anything but 2xx.
func (o *outbox) post(ctx context.Context, cfg *a2a.PushConfig, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.Token != "" {
		req.Header.Set(pushTokenHeader, cfg.Token)
	}
	if a := cfg.Auth; a != nil && a.Credentials != "" {
		switch strings.ToLower(a.Scheme) {
		case "bearer":
			req.Header.Set("Authorization", "Bearer "+a.Credentials)
		case "basic":
			req.Header.Set("Authorization", "Basic "+a.Credentials)
		}
	}
	resp, err := o.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrForbiddenAddress) {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, cfg.URL)
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}
