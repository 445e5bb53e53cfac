package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// TestLiveSyncRestores checks that a live payload's commit, made at
// synchronous NORMAL on a connection of the pool, leaves the connection at
// the store's setting (FULL) for the saves that use it next.
func TestLiveSyncRestores(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "live.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.db.SetMaxOpenConns(1) // the payload's connection is the one read below
	if err := s.Publish(ctx, "m1", [][]byte{[]byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	var level int
	if err := s.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != 2 { // FULL
		t.Fatalf("synchronous = %d after a live commit, want 2 (FULL)", level)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM live_events WHERE machine_id = 'm1'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("live_events has %d rows of m1 (%v), want 1", n, err)
	}
}
