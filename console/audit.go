package console

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/markov-agents/markov/store"
)

// AuditRecheck is how long the console trusts a verification of the
// audit log before it walks the log again (sooner when entries were
// appended since).
const AuditRecheck = time.Minute

// auditStatus is the audit log's verification (store.VerifyAudit) as the
// console last made it: At when, Entries how many entries were checked,
// and Problem what broke the chain ("" when intact).
type auditStatus struct {
	Entries int64
	Signed  bool
	Problem string
	At      time.Time
}

// auditCheck verifies the audit log for the pages, at most once per
// AuditRecheck unless the log grew: a walk of the whole log is a page's
// work only when something changed.
type auditCheck struct {
	log store.AuditLog
	key ed25519.PublicKey
	mu  sync.Mutex
	// last is the last verification, of the log whose head was head.
	last *auditStatus
	head int64
}

// status returns the log's verification, walking it again when the last
// is stale; nil without a log. A store failure is reported as the
// problem (the page still shows).
func (a *auditCheck) status(ctx context.Context, now time.Time) *auditStatus {
	if a == nil || a.log == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	head, _, err := a.log.AuditHead(ctx)
	if err == nil && a.last != nil && head == a.head && now.Sub(a.last.At) < AuditRecheck {
		return a.last
	}
	st := &auditStatus{At: now, Signed: a.key != nil}
	if err == nil {
		st.Entries, err = store.VerifyAudit(ctx, a.log, a.key, nil)
	}
	if ae, ok := errors.AsType[*store.AuditError](err); ok {
		st.Problem = fmt.Sprintf("entry %d %s", ae.Seq, ae.Problem)
	} else if err != nil {
		st.Problem = "the log could not be read"
		return st // not cached: the next page tries again
	}
	a.last, a.head = st, head
	return st
}
