// Package livehub fans notices out to the subscribers of a key inside one
// process: the in-process half of store.EventLog for the stores that have
// no cross-process notification of their own (memstore, sqlite).
package livehub

import "sync"

// maxQueued is how many live items a subscriber keeps before dropping the
// oldest: live payloads are best effort, the log is the record.
const maxQueued = 4096

// Item is a live payload with the ID its store gave it (0 if none).
type Item struct {
	ID   int64
	Data []byte
}

// Hub fans notices out to subscribers by key. The zero value is ready.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*Sub]struct{}
}

// Sub is one subscriber.
type Sub struct {
	hub  *Hub
	key  string
	wake chan struct{}
	mu   sync.Mutex
	live []Item
}

// Subscribe adds a subscriber to key.
func (h *Hub) Subscribe(key string) *Sub {
	s := &Sub{hub: h, key: key, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[string]map[*Sub]struct{}{}
	}
	if h.subs[key] == nil {
		h.subs[key] = map[*Sub]struct{}{}
	}
	h.subs[key][s] = struct{}{}
	return s
}

// Notify wakes every subscriber of key, handing each the items.
func (h *Hub) Notify(key string, items ...Item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[key] {
		s.mu.Lock()
		s.live = append(s.live, items...)
		if over := len(s.live) - maxQueued; over > 0 {
			s.live = append(s.live[:0], s.live[over:]...)
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Wake is the channel that receives when the subscriber was notified.
func (s *Sub) Wake() <-chan struct{} { return s.wake }

// Take returns and forgets the items queued since the last call.
func (s *Sub) Take() []Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := s.live
	s.live = nil
	return items
}

// Close removes the subscriber. Calling it again does nothing.
func (s *Sub) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	delete(s.hub.subs[s.key], s)
	if len(s.hub.subs[s.key]) == 0 {
		delete(s.hub.subs, s.key)
	}
}
