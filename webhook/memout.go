package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// memOutbox attempts the deliveries this process claims in the store's
// replay guard, keeping them in memory: the Sender's outbox on stores
// without River.
type memOutbox struct {
	s    *Sender
	keep int
	ctx  context.Context // Run's, for the retries

	mu         sync.Mutex
	deliveries map[string]*Delivery
	order      []string // delivery IDs, oldest first
	wg         sync.WaitGroup
}

func (o *memOutbox) start(ctx context.Context) (func(), error) {
	o.ctx = ctx
	return o.wg.Wait, nil
}

// enqueue claims each delivery and starts the attempts of those claimed
// here; one claimed elsewhere (or before) is skipped.
func (o *memOutbox) enqueue(ctx context.Context, ds []*Delivery) error {
	s := o.s
	for _, d := range ds {
		sum := sha256.Sum256([]byte(d.ID))
		fresh, err := s.guard.Remember(ctx, "webhook-out:"+hex.EncodeToString(sum[:]), s.now().Add(claimWindow))
		if err != nil {
			s.logger.LogAttrs(ctx, slog.LevelWarn, "webhook: claim a delivery", slog.String("delivery_id", d.ID), slog.String("error", err.Error()))
			continue
		}
		if !fresh {
			continue // another process sends it
		}
		o.add(d)
		sub := s.subscription(d.Subscription)
		o.wg.Go(func() { o.retry(o.ctx, sub, d) })
	}
	return nil
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

// retry attempts d until it is delivered, dead, or ctx ends.
func (o *memOutbox) retry(ctx context.Context, sub *subscription, d *Delivery) {
	for n := 1; ; n++ {
		if o.attempt(ctx, sub, d) != Pending {
			return
		}
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
	s.logAttempt(ctx, d.ID, d.URL, d.Attempts, status, err)
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
