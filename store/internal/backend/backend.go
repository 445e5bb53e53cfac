// Package backend is what the stores below package store share: the set of
// capabilities each implements, and the small pieces the stores on a
// database write alike.
package backend

import (
	"fmt"

	"github.com/markov-agents/markov/store"
)

// Capabilities is the core interface with every optional capability but
// [store.Pinger], which needs a schema to check: what store/memstore
// implements.
type Capabilities interface {
	store.Store
	store.MachineLister
	store.ExpiryClaimer
	store.ReplayGuard
	store.EventLog
	store.TailLoader
	store.RequestReporter // and so store.SuspendRequester
	store.RecordKeeper
	store.AuditLog
	store.RuleUses
}

// Database is [Capabilities], [store.Pinger] and [store.Parker]: what
// store/sqlite and store/postgres implement.
type Database interface {
	Capabilities
	store.Pinger
	store.Parker
}

// NonNil turns nil into an empty slice: the drivers send nil as NULL, and
// the columns that hold bytes are NOT NULL.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Ping is [store.Pinger.Ping] of a store on a database: scan reads the
// stored schema version (the Scan of a row that holds it) and want is the
// version the store writes; another version is [store.ErrSchemaVersion].
// Errors are prefixed with pkg, the store's package name.
func Ping(pkg string, want int, scan func(dest ...any) error) error {
	var v int
	if err := scan(&v); err != nil {
		return fmt.Errorf("%s: ping: %w", pkg, err)
	}
	if v != want {
		return fmt.Errorf("%s: ping: schema version %d, want %d: %w", pkg, v, want, store.ErrSchemaVersion)
	}
	return nil
}
