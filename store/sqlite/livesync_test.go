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
	if err := s.Publish(ctx, "m1", [][]byte{[]byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	// The payload's connection is among the pool's idle ones: hold them
	// all (and a new one) while reading each one's setting.
	for i := range 3 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var level int
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&level); err != nil {
			t.Fatal(err)
		}
		if level != 2 { // FULL
			t.Fatalf("connection %d: synchronous = %d after a live commit, want 2 (FULL)", i, level)
		}
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM live_events WHERE machine_id = 'm1'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("live_events has %d rows of m1 (%v), want 1", n, err)
	}
}
