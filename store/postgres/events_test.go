package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// TestNoticesOnlyWhileWatched checks that a save and Publish NOTIFY a
// machine's channel only while a subscriber (Store.Subscribe) watches it:
// a bare LISTEN on the channel, which holds no watch, hears the notices
// sent while the subscriber was there and none from before. Notices of
// one channel arrive in commit order, so its first one tells.
func TestNoticesOnlyWhileWatched(t *testing.T) {
	ctx := context.Background()
	s, url, schema := pgtest.Open(t)
	h := sha256.Sum256([]byte(schema + "\x00m"))
	channel := "markov_" + hex.EncodeToString(h[:12])
	bare, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close(ctx)
	if _, err := bare.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}

	// Unwatched: no notice.
	if err := s.Publish(ctx, "m", [][]byte{[]byte("unheard")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Events: [][]byte{[]byte(`{"v":1}`)}}); err != nil {
		t.Fatal(err)
	}

	sub, err := s.Subscribe(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := s.Publish(ctx, "m", [][]byte{[]byte("heard")}); err != nil {
		t.Fatal(err)
	}
	n, err := sub.Next(ctx)
	if err != nil || len(n.Live) != 1 || string(n.Live[0]) != "heard" {
		t.Fatalf("subscriber's first notice %+v, %v; want the live payload heard", n, err)
	}
	note, err := bare.WaitForNotification(ctx)
	if err != nil || note.Payload != "lheard" {
		t.Fatalf("bare listener's first notice %+v, %v; want lheard (nothing sent unwatched)", note, err)
	}

	// Watched: a save's commit notice is sent too.
	if _, err := s.Save(ctx, store.Save{MachineID: "m", Revision: 1, Events: [][]byte{[]byte(`{"v":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if n, err := sub.Next(ctx); err != nil || !n.Appended {
		t.Fatalf("subscriber's notice after a save %+v, %v; want Appended", n, err)
	}
}
