package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// openTemp opens a store on a new database file; more stores on the same
// file are more processes (each holds its own descriptors of the -watch
// file, whose locks are per descriptor).
func openTemp(t *testing.T, path string, readOnly bool) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: path, ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// liveRows counts machineID's rows in live_events.
func liveRows(t *testing.T, s *Store, machineID string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRowContext(context.Background(), `SELECT count(*) FROM live_events WHERE machine_id = ?`, machineID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func publish(t *testing.T, s *Store, machineID, payload string) {
	t.Helper()
	if err := s.Publish(context.Background(), machineID, [][]byte{[]byte(payload)}); err != nil {
		t.Fatal(err)
	}
}

// TestLiveSyncRestores checks that a live payload's commit, made at
// synchronous NORMAL on a connection of the pool, leaves the connection at
// the store's setting (FULL) for the saves that use it next.
func TestLiveSyncRestores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "live.db")
	s := openTemp(t, path, false)
	sub, err := openTemp(t, path, false).Subscribe(ctx, "m1") // a watcher elsewhere
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publish(t, s, "m1", `{"v":1}`)
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
	if n := liveRows(t, s, "m1"); n != 1 {
		t.Fatalf("live_events has %d rows of m1, want 1", n)
	}
}

// TestPublishOnlyWhenWatched checks that live payloads are written only
// while a machine subscription is open somewhere — in another process
// (another store on the file), read-only or not, or in this one — and
// reach it; the feed's subscriptions do not count.
func TestPublishOnlyWhenWatched(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "live.db")
	s := openTemp(t, path, false)
	other := openTemp(t, path, false)
	reader := openTemp(t, path, true)

	publish(t, s, "m1", `"nobody"`)
	feed, err := other.Subscribe(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	publish(t, s, "m1", `"feed only"`)
	if n := liveRows(t, s, "m1"); n != 0 {
		t.Fatalf("%d payloads written with no machine subscription open, want 0", n)
	}

	for i, w := range []*Store{other, reader, s, other} { // other again: its first Close counted once
		sub, err := w.Subscribe(ctx, "m2") // any machine's subscription counts
		if err != nil {
			t.Fatal(err)
		}
		publish(t, s, "m2", `"watched"`)
		if n := liveRows(t, s, "m2"); n != i+1 {
			t.Fatalf("watcher %d: %d payloads of m2 written, want %d", i, n, i+1)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := sub.Next(wctx)
		cancel()
		if err != nil || len(n.Live) != 1 || string(n.Live[0]) != `"watched"` {
			t.Fatalf("watcher %d: Next = %q, %v; want the payload", i, n.Live, err)
		}
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		sub.Close() // again: does nothing
		publish(t, s, "m2", `"unwatched"`)
		if n := liveRows(t, s, "m2"); n != i+1 {
			t.Fatalf("watcher %d closed: %d payloads of m2 written, want %d", i, n, i+1)
		}
	}
}

// TestMmapSize checks that every connection reads through a memory map
// of Config.MmapSize bytes, DefaultMmapSize by default, none when it is
// negative.
func TestMmapSize(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		set, want int64
	}{{0, DefaultMmapSize}, {1 << 20, 1 << 20}, {-1, 0}} {
		s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "m.db"), MmapSize: tt.set})
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		err = s.db.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&got)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("MmapSize %d: mmap_size = %d, want %d", tt.set, got, tt.want)
		}
	}
}
