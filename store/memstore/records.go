package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/markov-agents/markov/store"
)

// PutRecord implements [store.RecordKeeper].
func (s *Store) PutRecord(ctx context.Context, r store.Record, prev int64) (int64, error) {
	if err := store.CheckRecord(r, prev); err != nil {
		return 0, fmt.Errorf("memstore: put record: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	k := [2]string{r.Kind, r.Key}
	if s.records[k].Version != prev {
		return 0, fmt.Errorf("memstore: put record %s/%s: %w: version %d, not %d", r.Kind, r.Key, store.ErrConflict, s.records[k].Version, prev)
	}
	r.Data, r.Version, r.UpdatedAt = slices.Clone(r.Data), prev+1, s.now()
	s.records[k] = r
	return r.Version, nil
}

// GetRecord implements [store.RecordKeeper].
func (s *Store) GetRecord(ctx context.Context, kind, key string) (store.Record, error) {
	if err := s.lock(ctx); err != nil {
		return store.Record{}, err
	}
	defer s.mu.Unlock()
	r, ok := s.records[[2]string{kind, key}]
	if !ok {
		return store.Record{}, fmt.Errorf("memstore: record %s/%s: %w", kind, key, store.ErrNotFound)
	}
	r.Data = slices.Clone(r.Data)
	return r, nil
}

// ListRecords implements [store.RecordKeeper].
func (s *Store) ListRecords(ctx context.Context, kind, prefix string) ([]store.Record, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Record
	for k, r := range s.records {
		if k[0] == kind && strings.HasPrefix(k[1], prefix) {
			r.Data = slices.Clone(r.Data)
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.Record) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

// DeleteRecord implements [store.RecordKeeper].
func (s *Store) DeleteRecord(ctx context.Context, kind, key string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.records, [2]string{kind, key})
	return nil
}
