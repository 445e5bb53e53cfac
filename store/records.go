package store

import (
	"context"
	"fmt"
	"time"
)

// RecordKeeper is the optional capability of a [Store] that keeps
// versioned records beside the machines, for every process that shares
// the store: a protocol package keeps there what its protocol names
// apart from a machine (package a2a: its tasks and push notification
// configurations). A record is opaque bytes under a kind and a key;
// writes compare and swap on its version, so of two processes updating
// one record from the same version exactly one wins.
type RecordKeeper interface {
	// PutRecord writes r.Data under (r.Kind, r.Key) if the stored
	// version is prev (0: no record may exist) and returns the new
	// version, prev+1. A version mismatch is ErrConflict and writes
	// nothing; a kind or key that is not a [ValidID], or a negative
	// prev, is ErrInvalid.
	PutRecord(ctx context.Context, r Record, prev int64) (version int64, err error)
	// GetRecord returns the record (kind, key), or ErrNotFound.
	GetRecord(ctx context.Context, kind, key string) (Record, error)
	// ListRecords returns the records of kind whose key starts with
	// prefix, in ascending (bytewise) key order.
	ListRecords(ctx context.Context, kind, prefix string) ([]Record, error)
	// DeleteRecord deletes the record (kind, key); one that is not kept
	// is no error.
	DeleteRecord(ctx context.Context, kind, key string) error
}

// Record is one record of a [RecordKeeper].
type Record struct {
	// Kind names the records' owner and type ("a2a.task"), Key the
	// record among them. Both required, [ValidID]s.
	Kind, Key string
	// Data is the record, opaque to the store.
	Data []byte
	// Version counts the record's writes: 1 after its creation. Set by
	// the store.
	Version int64
	// UpdatedAt is when it was last written (store clock, UTC). Set by
	// the store.
	UpdatedAt time.Time
}

// CheckRecord reports a record PutRecord refuses, wrapping [ErrInvalid].
func CheckRecord(r Record, prev int64) error {
	if p := idProblem(r.Kind); p != "" {
		return fmt.Errorf("%w: record kind %s", ErrInvalid, p)
	}
	if p := idProblem(r.Key); p != "" {
		return fmt.Errorf("%w: record key %s", ErrInvalid, p)
	}
	if prev < 0 {
		return fmt.Errorf("%w: record %s/%s: previous version %d is negative", ErrInvalid, r.Kind, r.Key, prev)
	}
	return nil
}
