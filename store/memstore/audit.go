package memstore

import (
	"context"
	"fmt"

	"github.com/markov-agents/markov/store"
)

// appendAuditLocked appends entries to the audit log.
func (s *Store) appendAuditLocked(entries []store.AuditAppend) {
	for _, e := range entries {
		var prev []byte
		if n := len(s.audit); n > 0 {
			prev = s.audit[n-1].Hash
		}
		s.audit = append(s.audit, store.AuditEntry{
			Seq: int64(len(s.audit)) + 1, MachineID: e.MachineID, Entry: clone(e.Entry),
			Prev: prev, Hash: store.ChainHash(prev, e.Entry), Signature: clone(e.Signature),
		})
	}
}

// AppendAudit implements [store.AuditLog].
func (s *Store) AppendAudit(ctx context.Context, entries []store.AuditAppend) error {
	if err := store.ValidateAudit(entries); err != nil {
		return fmt.Errorf("memstore: append audit: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.appendAuditLocked(entries)
	return nil
}

// ReadAudit implements [store.AuditLog].
func (s *Store) ReadAudit(ctx context.Context, afterSeq int64, limit int) ([]store.AuditEntry, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	from := min(max(afterSeq, 0), int64(len(s.audit)))
	page := s.audit[from:]
	if limit > 0 && len(page) > limit {
		page = page[:limit]
	}
	return append([]store.AuditEntry(nil), page...), nil
}

// AuditHead implements [store.AuditLog].
func (s *Store) AuditHead(ctx context.Context) (int64, []byte, error) {
	if err := s.lock(ctx); err != nil {
		return 0, nil, err
	}
	defer s.mu.Unlock()
	if n := len(s.audit); n > 0 {
		return int64(n), s.audit[n-1].Hash, nil
	}
	return 0, nil, nil
}
