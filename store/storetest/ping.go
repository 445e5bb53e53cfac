package storetest

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/markov-agents/markov/store"
)

// PingableStore is a store that checks it can serve and can be closed.
type PingableStore interface {
	store.Pinger
	io.Closer
}

// Ping checks a [store.Pinger]: Ping succeeds on the open store s, reports
// [store.ErrSchemaVersion] while setNewer(true) has made the stored schema
// newer than the store's (as another process's migration would), succeeds
// again after setNewer(false), and fails once s is closed. setNewer changes
// the schema version through a connection of its own.
func Ping(t *testing.T, s PingableStore, setNewer func(newer bool)) {
	t.Helper()
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	setNewer(true)
	if err := s.Ping(ctx); !errors.Is(err, store.ErrSchemaVersion) {
		t.Fatalf("Ping after another process migrated = %v, want ErrSchemaVersion", err)
	}
	setNewer(false)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping of a closed store succeeded")
	}
}
