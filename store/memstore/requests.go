package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/markov-agents/markov/store"
)

// AddSuspendRequest implements [store.SuspendRequester].
func (s *Store) AddSuspendRequest(ctx context.Context, r store.SuspendRequest) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("memstore: add suspend request: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.machines[r.MachineID]; !ok {
		return fmt.Errorf("memstore: add suspend request %q: machine %q: %w", r.ID, r.MachineID, store.ErrNotFound)
	}
	for _, reqs := range s.requests {
		if slices.ContainsFunc(reqs, func(o store.SuspendRequest) bool { return o.ID == r.ID }) {
			return fmt.Errorf("memstore: add suspend request %q: %w", r.ID, store.ErrConflict)
		}
	}
	r.Body, r.CreatedAt = clone(r.Body), s.now()
	s.requests[r.MachineID] = append(s.requests[r.MachineID], r)
	return nil
}

// SuspendRequests implements [store.SuspendRequester].
func (s *Store) SuspendRequests(ctx context.Context, machineID string) ([]store.SuspendRequest, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	reqs := s.requests[machineID]
	if len(reqs) == 0 {
		return nil, nil
	}
	out := make([]store.SuspendRequest, len(reqs))
	for i, r := range reqs {
		r.Body = clone(r.Body)
		out[i] = r
	}
	return out, nil
}

// DropSuspendRequest implements [store.SuspendRequester].
func (s *Store) DropSuspendRequest(ctx context.Context, machineID, id string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	reqs := slices.DeleteFunc(s.requests[machineID], func(r store.SuspendRequest) bool { return r.ID == id })
	if len(reqs) == 0 {
		delete(s.requests, machineID)
	} else {
		s.requests[machineID] = reqs
	}
	return nil
}
