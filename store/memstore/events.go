package memstore

import (
	"context"
	"fmt"

	"github.com/markov-agents/markov/internal/livehub"
	"github.com/markov-agents/markov/store"
)

// feedKey is the hub key of the suspension feed (machine IDs are never
// empty).
const feedKey = ""

// ReadEvents implements [store.EventLog].
func (s *Store) ReadEvents(ctx context.Context, machineID string, afterSeq int64, limit int) ([]store.LogEvent, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	m, ok := s.machines[machineID]
	if !ok {
		return nil, nil
	}
	var out []store.LogEvent
	for _, e := range m.events[min(max(afterSeq-m.floor, 0), int64(len(m.events))):] {
		if limit > 0 && len(out) == limit {
			break
		}
		e.Data = clone(e.Data)
		out = append(out, e)
	}
	return out, nil
}

// ReadSuspensionChanges implements [store.EventLog].
func (s *Store) ReadSuspensionChanges(ctx context.Context, afterCursor int64, limit int) ([]store.SuspensionChange, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.SuspensionChange
	for _, c := range s.feed {
		if c.Cursor <= afterCursor {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		if c.Machine != nil { // a copy: the caller's to change
			m := *c.Machine
			c.Machine = &m
		}
		out = append(out, c)
	}
	return out, nil
}

// Publish implements [store.EventLog]: the payloads reach this store's
// subscriptions (a memstore is one process's).
func (s *Store) Publish(ctx context.Context, machineID string, payloads [][]byte) error {
	if err := store.CheckLive(machineID, payloads); err != nil {
		return fmt.Errorf("memstore: publish: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	items := make([]livehub.Item, len(payloads))
	for i, p := range payloads {
		items[i] = livehub.Item{Data: clone(p)}
	}
	s.hub.Notify(machineID, items...)
	return nil
}

// Subscribe implements [store.EventLog].
func (s *Store) Subscribe(ctx context.Context, machineID string) (store.Subscription, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return &subscription{sub: s.hub.Subscribe(machineID)}, nil
}

// subscription is a [store.Subscription] on the hub.
type subscription struct{ sub *livehub.Sub }

func (s *subscription) Next(ctx context.Context) (store.Notice, error) {
	select {
	case <-s.sub.Wake():
	case <-ctx.Done():
		return store.Notice{}, ctx.Err()
	}
	n := store.Notice{Appended: true}
	for _, it := range s.sub.Take() {
		n.Live = append(n.Live, it.Data)
	}
	return n, nil
}

func (s *subscription) Close() error {
	s.sub.Close()
	return nil
}
