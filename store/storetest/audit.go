package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/markov-agents/markov/store"
)

// auditStore is a store with an audit log.
type auditStore interface {
	store.Store
	store.AuditLog
}

var auditChecks = []check[auditStore]{
	{"Empty", testAuditEmpty},
	{"SaveAndAppend", testAuditSaveAndAppend},
	{"FailedSave", testAuditFailedSave},
	{"Invalid", testAuditInvalid},
	{"Concurrent", testAuditConcurrent},
}

func entry(i int) store.AuditAppend {
	return store.AuditAppend{MachineID: "m1", Entry: fmt.Appendf(nil, `{"n":%d}`, i)}
}

// verified verifies l's chain and returns its length.
func verified(t *testing.T, l store.AuditLog) int64 {
	t.Helper()
	n, err := store.VerifyAudit(context.Background(), l, nil, nil)
	if err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	return n
}

func testAuditEmpty(t *testing.T, s auditStore) {
	seq, hash, err := s.AuditHead(context.Background())
	if err != nil || seq != 0 || hash != nil {
		t.Fatalf("AuditHead of an empty log: %d, %x, %v", seq, hash, err)
	}
	if n := verified(t, s); n != 0 {
		t.Fatalf("an empty log verifies with %d entries", n)
	}
}

func testAuditSaveAndAppend(t *testing.T, s auditStore) {
	ctx := context.Background()
	if _, err := s.Save(ctx, store.Save{MachineID: "m1", Tree: []byte("t"), Audit: []store.AuditAppend{entry(1), entry(2)}}); err != nil {
		t.Fatalf("Save: %v", err)
	}
	e := entry(3)
	e.Signature = []byte("sig")
	if err := s.AppendAudit(ctx, []store.AuditAppend{e}); err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	if n := verified(t, s); n != 3 {
		t.Fatalf("verified %d entries, want 3", n)
	}
	all, err := s.ReadAudit(ctx, 0, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("ReadAudit: %d entries, %v", len(all), err)
	}
	for i, got := range all {
		if got.Seq != int64(i+1) || got.MachineID != "m1" || string(got.Entry) != string(entry(i+1).Entry) {
			t.Fatalf("entry %d: %+v", i, got)
		}
	}
	if string(all[2].Signature) != "sig" || len(all[0].Signature) != 0 {
		t.Fatalf("signatures: %q, %q", all[0].Signature, all[2].Signature)
	}
	page, err := s.ReadAudit(ctx, 1, 1)
	if err != nil || len(page) != 1 || page[0].Seq != 2 {
		t.Fatalf("ReadAudit(1, 1): %+v, %v", page, err)
	}
	seq, hash, err := s.AuditHead(ctx)
	if err != nil || seq != 3 || string(hash) != string(all[2].Hash) {
		t.Fatalf("AuditHead: %d, %x, %v; last entry's hash %x", seq, hash, err, all[2].Hash)
	}
}

func testAuditFailedSave(t *testing.T, s auditStore) {
	ctx := context.Background()
	if _, err := s.Save(ctx, store.Save{MachineID: "m1", Tree: []byte("t")}); err != nil {
		t.Fatalf("Save: %v", err)
	}
	_, err := s.Save(ctx, store.Save{MachineID: "m1", Revision: 7, Tree: []byte("t"), Audit: []store.AuditAppend{entry(1)}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Save at a stale revision: %v, want ErrConflict", err)
	}
	if n := verified(t, s); n != 0 {
		t.Fatalf("a failed save appended %d entries", n)
	}
}

func testAuditInvalid(t *testing.T, s auditStore) {
	ctx := context.Background()
	for _, bad := range []store.AuditAppend{{MachineID: "m1"}, {MachineID: "", Entry: []byte("{}")}} {
		if err := s.AppendAudit(ctx, []store.AuditAppend{entry(1), bad}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("AppendAudit(%+v): %v, want ErrInvalid", bad, err)
		}
		if _, err := s.Save(ctx, store.Save{MachineID: "m1", Tree: []byte("t"), Audit: []store.AuditAppend{bad}}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Save with audit entry %+v: %v, want ErrInvalid", bad, err)
		}
	}
	if n := verified(t, s); n != 0 {
		t.Fatalf("refused appends left %d entries", n)
	}
}

// Concurrent appends never fork the chain.
func testAuditConcurrent(t *testing.T, s auditStore) {
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- s.AppendAudit(context.Background(), []store.AuditAppend{entry(w*each + i)})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
	}
	if n := verified(t, s); n != writers*each {
		t.Fatalf("verified %d entries, want %d", n, writers*each)
	}
}
