package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/markov-agents/markov/store"
)

// memOutbox attempts the deliveries this process claims in the store's
// replay guard: the Sender's outbox on stores without River (SQLite). It
// keeps each delivery's state with its claim (store.OutcomeKeeper), and
// the Sender's position in the feed before the first delivery not yet
// settled, so a Sender started after a stop or a crash takes over the
// deliveries left pending — with the same ID — and shows the settled
// ones again.
type memOutbox struct {
	s      *Sender
	keep   int
	keeper store.OutcomeKeeper // nil: the states are not kept
	ctx    context.Context     // Run's, for the retries
	// started is when Run started: a pending delivery created before is
	// taken over, one created since belongs to the process attempting it.
	started time.Time

	mu         sync.Mutex
	deliveries map[string]*Delivery
	order      []string // delivery IDs, oldest first
	// open are the cursors of the deliveries attempted here and not
	// settled; through is where the feed was read up to.
	open    map[string]int64
	through int64
	wg      sync.WaitGroup
}

func newMemOutbox(s *Sender, keep int) *memOutbox {
	o := &memOutbox{s: s, keep: keep, deliveries: map[string]*Delivery{}, open: map[string]int64{}}
	o.keeper, _ = s.guard.(store.OutcomeKeeper)
	return o
}

func (o *memOutbox) start(ctx context.Context) (func(), error) {
	o.ctx, o.started = ctx, o.s.now()
	return o.wg.Wait, nil
}

// claimKey is the replay guard's key of delivery id.
func claimKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "webhook-out:" + hex.EncodeToString(sum[:])
}

// enqueue claims each delivery and starts the attempts of those claimed
// here, and of those left pending by a sender that stopped; one claimed
// by a running process is skipped.
func (o *memOutbox) enqueue(ctx context.Context, ds []*Delivery, through int64) (int64, error) {
	s := o.s
	for _, d := range ds {
		key := claimKey(d.ID)
		fresh, err := s.guard.Remember(ctx, key, s.now().Add(claimWindow))
		if err != nil {
			s.logger.LogAttrs(ctx, slog.LevelWarn, "webhook: claim a delivery", slog.String("delivery_id", d.ID), slog.String("error", err.Error()))
			continue
		}
		if !fresh {
			if d = o.left(ctx, key, d); d == nil {
				continue // another process sends it
			}
		} else {
			o.save(ctx, d)
		}
		o.add(d)
		if d.State != Pending {
			continue
		}
		o.mu.Lock()
		o.open[d.ID] = d.cursor
		o.mu.Unlock()
		sub := s.subscription(d.Subscription)
		o.wg.Go(func() { o.retry(o.ctx, sub, d) })
	}
	o.mu.Lock()
	o.through = through
	o.mu.Unlock()
	return o.low(), nil
}

// left returns the kept state of delivery d claimed before (nil if this
// process has it already, or if a running process attempts it).
func (o *memOutbox) left(ctx context.Context, key string, d *Delivery) *Delivery {
	o.mu.Lock()
	_, have := o.deliveries[d.ID]
	o.mu.Unlock()
	if have || o.keeper == nil {
		return nil
	}
	raw, err := o.keeper.Outcome(ctx, key)
	if err != nil {
		return nil
	}
	if raw != nil { // nil: the claimer stopped before it kept a state
		var kept Delivery
		if json.Unmarshal(raw, &kept) != nil || kept.ID != d.ID {
			return nil
		}
		kept.cursor = d.cursor
		d = &kept
	}
	if d.State == Pending && !d.CreatedAt.Before(o.started) {
		return nil
	}
	return d
}

// save keeps the state of d with its claim.
func (o *memOutbox) save(ctx context.Context, d *Delivery) {
	if o.keeper == nil {
		return
	}
	o.mu.Lock()
	b, err := json.Marshal(d)
	o.mu.Unlock()
	if err == nil {
		err = o.keeper.KeepOutcome(context.WithoutCancel(ctx), claimKey(d.ID), b)
	}
	if err != nil {
		o.s.logger.LogAttrs(ctx, slog.LevelWarn, "webhook: keep a delivery's state", slog.String("delivery_id", d.ID), slog.String("error", err.Error()))
	}
}

// low is the position to save: before the first delivery not settled,
// or where the feed was read up to.
func (o *memOutbox) low() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	pos := o.through
	for _, c := range o.open {
		pos = min(pos, c-1)
	}
	return pos
}

// add keeps d, dropping the oldest delivery past keep.
func (o *memOutbox) add(d *Delivery) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deliveries[d.ID] = d
	o.order = append(o.order, d.ID)
	if len(o.order) > o.keep {
		delete(o.deliveries, o.order[0])
		o.order = o.order[1:]
	}
}

// retry attempts d until it is delivered, dead, or ctx ends (an attempt
// in flight then finishes: Timeout bounds it); once it is settled, the
// position moves past it.
func (o *memOutbox) retry(ctx context.Context, sub *subscription, d *Delivery) {
	for {
		if o.attempt(context.WithoutCancel(ctx), sub, d) != Pending {
			o.mu.Lock()
			delete(o.open, d.ID)
			o.mu.Unlock()
			o.s.savePosition(ctx, o.low())
			return
		}
		o.mu.Lock()
		n := d.Attempts
		o.mu.Unlock()
		t := time.NewTimer(o.s.wait(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// attempt POSTs d once and returns its state after: Delivered, Pending
// (to be tried again) or Dead (its last attempt; an unsafe target or a
// 410 Gone are dead at once).
func (o *memOutbox) attempt(ctx context.Context, sub *subscription, d *Delivery) DeliveryState {
	s := o.s
	o.mu.Lock()
	body := d.Body
	o.mu.Unlock()
	status, err := s.post(ctx, sub, d.ID, body)
	state := o.record(d, status, err)
	s.logAttempt(ctx, d.ID, d.URL, d.Attempts, status, err)
	o.save(ctx, d)
	return state
}

// record sets the state of d after an attempt answered status (0: none)
// or failed with err, and returns it.
func (o *memOutbox) record(d *Delivery, status int, err error) DeliveryState {
	s := o.s
	o.mu.Lock()
	defer o.mu.Unlock()
	d.Attempts++
	d.LastStatus, d.LastError, d.NextAttempt = status, "", time.Time{}
	switch {
	case err == nil:
		d.State = Delivered
	case errors.Is(err, ErrUnsafeTarget) || status == http.StatusGone || d.Attempts >= s.maxAttempts:
		d.State, d.LastError = Dead, err.Error()
	default:
		d.State, d.LastError = Pending, err.Error()
		d.NextAttempt = s.now().Add(s.wait(d.Attempts))
	}
	return d.State
}

func (o *memOutbox) list(_ context.Context, state DeliveryState, limit int) ([]Delivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := []Delivery{}
	for i := len(o.order) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		if d := o.deliveries[o.order[i]]; state == "" || d.State == state {
			out = append(out, *d)
		}
	}
	return out, nil
}

func (o *memOutbox) get(_ context.Context, id string) (Delivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, ok := o.deliveries[id]
	if !ok {
		return Delivery{}, fmt.Errorf("%w: %s", ErrUnknownDelivery, id)
	}
	return *d, nil
}

func (o *memOutbox) redeliver(ctx context.Context, id string) (Delivery, error) {
	o.mu.Lock()
	d := o.deliveries[id]
	o.mu.Unlock()
	if d == nil {
		return Delivery{}, fmt.Errorf("%w: %s", ErrUnknownDelivery, id)
	}
	o.attempt(ctx, o.s.subscription(d.Subscription), d)
	return o.get(ctx, id)
}
