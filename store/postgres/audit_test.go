package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// counter counts the statements sent on a pool's connections.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countingStore opens a store whose statements c counts.
func countingStore(tb testing.TB, c *counter) *postgres.Store {
	tb.Helper()
	url := pgtest.URL(tb)
	schema := pgtest.Schema(tb, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	s, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// decisionSave is the save of a decision on machine m at rev: the tree,
// a history record, the suspension that stays pending, and audit.
func decisionSave(rev int64, audit []store.AuditAppend) store.Save {
	return store.Save{MachineID: "m", Revision: rev, Tree: []byte("tree"), Append: [][]byte{[]byte("decision record")},
		Suspensions: []store.Suspension{{ID: "s1", Status: store.StatusPending, Kind: "tool", Name: "pay"}}, Audit: audit}
}

// statementsPerSave saves decisions with audit entries (or none) and
// returns the statements each save sent.
func statementsPerSave(tb testing.TB, s *postgres.Store, c *counter, n int, withAudit bool) float64 {
	tb.Helper()
	ctx := context.Background()
	rev, err := s.Save(ctx, decisionSave(0, nil))
	if err != nil {
		tb.Fatal(err)
	}
	var audit []store.AuditAppend
	if withAudit {
		audit = []store.AuditAppend{{MachineID: "m", Entry: []byte(`{"kind":"decision","by":"bo"}`)}}
	}
	before := c.n.Load()
	for range n {
		if rev, err = s.Save(ctx, decisionSave(rev, audit)); err != nil {
			tb.Fatal(err)
		}
	}
	return float64(c.n.Load()-before) / float64(n)
}

// The audit entry of a decision is one statement more in the decision's
// save transaction, and no other.
func TestAuditAppendIsOneStatement(t *testing.T) {
	var c counter
	without := statementsPerSave(t, countingStore(t, &c), &c, 5, false)
	with := statementsPerSave(t, countingStore(t, &c), &c, 5, true)
	if with != without+1 {
		t.Fatalf("a save with an audit entry sends %v statements, without %v: want one more", with, without)
	}
}

// BenchmarkDecisionSave saves a decision with and without its audit
// entry, and reports the statements each save sends.
func BenchmarkDecisionSave(b *testing.B) {
	for _, withAudit := range []bool{false, true} {
		name := "without_audit"
		if withAudit {
			name = "with_audit"
		}
		b.Run(name, func(b *testing.B) {
			var c counter
			s := countingStore(b, &c)
			b.ResetTimer()
			b.ReportMetric(statementsPerSave(b, s, &c, b.N, withAudit), "statements/save")
		})
	}
}
