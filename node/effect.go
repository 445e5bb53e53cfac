package node

import (
	"context"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/internal/frame"
)

// EffectConfig is what an effect declares besides its function (see
// command.EffectConfig).
type EffectConfig[T any] = command.EffectConfig[T]

// Effect runs fn, the tool's external effect name (a payment, an email, a
// write to a database), through the machine's effect journal, so that it
// runs once however often the call runs:
//
//	receipt, err := node.Effect(ctx, "charge", func(ctx context.Context) (Receipt, error) {
//		return payments.Charge(ctx, in.Card, in.Amount)
//	}, node.EffectConfig[Receipt]{Input: in})
//
// Before fn runs, the journal records the effect as started (the call's
// idempotency key and name, a digest of cfg.Input); after it returns, as
// done with its result or failed with its error. A call runs again after
// a crash (its process died after the model's reply was saved), a rescued
// fleet job or a retried resume; its effect then finds the entry:
//
//   - done: the journaled result is returned, and fn does not run;
//   - failed: the journaled error is returned, and fn does not run;
//   - started, never ended (the process died while fn ran): the effect is
//     in doubt, and fn does not run blindly. cfg.Reconcile, when set, is
//     asked whether it happened (found: done with that result; not found:
//     fn runs). Without it, or when it cannot tell, Effect returns a
//     suspension: return it, as ctx.Suspend's, and the call waits for a
//     person (instance.InDoubt, instance.InDoubtDecision) to decide —
//     retry, done with a result, or fail. The call then runs again and
//     its effect acts on the decision.
//
// Each effect of one call has its own name (a second use of a name is
// instance.ErrDuplicateEffect). Without a journal — a machine outside a
// durable runner, or a store without store.EffectJournal — fn just runs.
func Effect[S, T any](ctx *ToolContext[S], name string, fn func(ctx context.Context) (T, error), cfg EffectConfig[T]) (T, error) {
	return frame.Effect(ctx.f, name, fn, effectSpec(cfg))
}

// EffectTx runs fn, the tool's effect name on the store's own database,
// in one transaction with its journal entry, so that it happens exactly
// once — or not at all — however often the call runs:
//
//	n, err := node.EffectTx(ctx, "book", func(ctx context.Context, tx *sql.Tx) (int64, error) {
//		res, err := tx.ExecContext(ctx, `INSERT INTO bookings (seat) VALUES (?)`, in.Seat)
//		if err != nil {
//			return 0, err
//		}
//		return res.LastInsertId()
//	})
//
// fn takes the store's transaction: a *sql.Tx on SQLite (store/sqlite), a
// pgx.Tx on PostgreSQL (store/postgres). The transaction records the
// effect done with fn's result and commits: fn's writes and the entry
// commit together. A call that runs again (a crash, a rescued fleet job,
// a retried resume) then finds it done, gets the journaled result, and fn
// does not run; if the transaction never committed, nothing happened,
// and fn runs. No tx effect is ever in doubt. An error (or panic) of fn
// rolls back its writes and records nothing: the call gets the error,
// and the effect runs again if the call does.
//
// fn must write through tx alone, and nothing outside the database (use
// Effect for that); keep it short, as it holds the transaction open. The
// store must run transactions: memstore does not, nor does a machine
// outside a durable runner, and there — as with a transaction of another
// type than fn takes — EffectTx returns instance.ErrEffectTx and fn does
// not run. Names are shared with Effect: each effect of one call has its
// own (a second use is instance.ErrDuplicateEffect).
func EffectTx[S, T, X any](ctx *ToolContext[S], name string, fn func(ctx context.Context, tx X) (T, error)) (T, error) {
	return frame.EffectTx(ctx.f, name, fn)
}

// effectSpec is cfg as package frame takes it.
func effectSpec[T any](cfg EffectConfig[T]) frame.EffectSpec[T] {
	return frame.EffectSpec[T]{Input: cfg.Input, Reconcile: cfg.Reconcile, Timeout: cfg.Timeout}
}
