package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
)

// AuditLog is the optional capability of a [Store] that keeps an audit
// log: an append-only, hash-chained list of entries — decisions on
// suspensions, refusals — shared by every machine of the store. Entry k
// holds the hash of entry k-1 (Prev) and its own, [ChainHash] of the two;
// a changed, removed or reordered entry breaks the chain, which
// [VerifyAudit] walks. Entries of a [Save]'s Audit are appended in the
// save's transaction, one statement each.
type AuditLog interface {
	// AppendAudit appends entries on their own, in one transaction (a
	// refusal, which changes no machine).
	AppendAudit(ctx context.Context, entries []AuditAppend) error
	// ReadAudit returns up to limit (no cap if limit <= 0) entries with
	// Seq > afterSeq, in Seq order.
	ReadAudit(ctx context.Context, afterSeq int64, limit int) ([]AuditEntry, error)
	// AuditHead returns the sequence number and hash of the last entry
	// appended (0 and nil for an empty log), kept apart from the entries:
	// a log cut short no longer reaches it.
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
}

// AuditAppend is an entry to append to the audit log.
type AuditAppend struct {
	// MachineID is the machine the entry is about.
	MachineID string
	// Entry is the entry's content (JSON, made by the writer), chained as
	// is.
	Entry []byte
	// Signature, when set, is an ed25519 signature of Entry by the
	// process that wrote it.
	Signature []byte
}

// AuditEntry is an entry of the audit log.
type AuditEntry struct {
	// Seq counts entries from 1, without gaps.
	Seq       int64
	MachineID string
	Entry     []byte
	// Prev is the hash of the entry before (empty for the first); Hash is
	// ChainHash(Prev, Entry).
	Prev, Hash []byte
	Signature  []byte
}

// ChainHash is the hash of an entry: SHA-256 of the previous entry's hash
// followed by the entry.
func ChainHash(prev, entry []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(entry)
	return h.Sum(nil)
}

// auditPage is how many entries VerifyAudit reads at a time.
const auditPage = 1000

// VerifyAudit walks the audit log of l from its first entry and returns
// the number of entries, or an *AuditError (wrapping ErrAuditBroken) at
// the first that breaks the chain: a sequence number out of order or
// missing, a Prev that is not the hash of the entry before, a Hash that
// is not ChainHash(Prev, Entry), a log that stops short of its head or
// goes past it; and, when key is set, an entry whose signature key does
// not verify. each, when set, sees every entry that passed.
func VerifyAudit(ctx context.Context, l AuditLog, key ed25519.PublicKey, each func(AuditEntry) error) (int64, error) {
	// The head is read first: entries appended during the walk lie past
	// it and are not checked.
	headSeq, headHash, err := l.AuditHead(ctx)
	if err != nil {
		return 0, err
	}
	var seq int64
	var prev []byte
	for seq < headSeq {
		page, err := l.ReadAudit(ctx, seq, auditPage)
		if err != nil {
			return seq, err
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Seq > headSeq {
				break
			}
			if err := checkEntry(e, seq+1, prev, key); err != nil {
				return seq, err
			}
			if each != nil {
				if err := each(e); err != nil {
					return seq, err
				}
			}
			seq, prev = e.Seq, e.Hash
		}
	}
	if seq != headSeq || !bytes.Equal(prev, headHash) {
		return seq, &AuditError{Seq: seq, Problem: fmt.Sprintf("the log ends at entry %d, its head is entry %d", seq, headSeq)}
	}
	return seq, nil
}

// checkEntry checks entry e, expected at seq after an entry of hash prev.
func checkEntry(e AuditEntry, seq int64, prev []byte, key ed25519.PublicKey) error {
	switch {
	case e.Seq != seq:
		return &AuditError{Seq: seq, Problem: fmt.Sprintf("missing (entry %d follows entry %d)", e.Seq, seq-1)}
	case !bytes.Equal(e.Prev, prev):
		return &AuditError{Seq: e.Seq, Problem: "does not follow the entry before (reordered, or one removed)"}
	case !bytes.Equal(e.Hash, ChainHash(e.Prev, e.Entry)):
		return &AuditError{Seq: e.Seq, Problem: "changed (its hash does not match)"}
	case key != nil && !ed25519.Verify(key, e.Entry, e.Signature):
		return &AuditError{Seq: e.Seq, Problem: "signature does not verify"}
	}
	return nil
}

// ValidateAudit reports a malformed audit entry to append, wrapping
// [ErrInvalid]: a machine ID that is not a [ValidID], or an empty entry.
func ValidateAudit(entries []AuditAppend) error {
	for i, e := range entries {
		if p := idProblem(e.MachineID); p != "" {
			return fmt.Errorf("%w: audit entry %d: machine ID %s", ErrInvalid, i, p)
		}
		if len(e.Entry) == 0 {
			return fmt.Errorf("%w: audit entry %d is empty", ErrInvalid, i)
		}
	}
	return nil
}
