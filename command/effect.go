package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
)

// DefaultReconcileTimeout bounds a reconcile hook (EffectConfig.Reconcile)
// when its effect sets no Timeout.
const DefaultReconcileTimeout = frame.DefaultReconcileTimeout

// EffectConfig is what an effect declares besides its function. The zero
// value is usable: no input digest, no reconcile hook.
type EffectConfig[T any] struct {
	// Input is what the effect acts on (any JSON-encodable value): its
	// digest is journaled, and a call that runs again with another input
	// finds the effect in doubt rather than done.
	Input any
	// Reconcile asks the outside world whether the effect journaled under
	// key happened, when the journal says it started and never says it
	// ended (its process died in between): found, with its result; not
	// found, and the effect runs; or an error when it cannot tell, and a
	// person decides. Pass key to the downstream API as its idempotency
	// key, and it can tell.
	Reconcile func(ctx context.Context, key string) (result T, found bool, err error)
	// Timeout bounds Reconcile (DefaultReconcileTimeout if zero); a hook
	// that runs out, or panics, cannot tell.
	Timeout time.Duration
}

// Effect runs fn, the command's external effect name, through the
// machine's effect journal, so that it runs once however often the
// command runs: see node.Effect, which tools use, for the whole rule.
// Without a journal (a machine outside a durable runner, or a store
// without store.EffectJournal) or an idempotency key (an invocation
// without an ID), fn just runs. A command whose effect is in doubt fails
// with the in-doubt error rather than suspending.
func Effect[S, T any](ctx *Context[S], name string, fn func(ctx context.Context) (T, error), cfg EffectConfig[T]) (T, error) {
	out, err := frame.Effect(ctx.f, name, fn, cfg.spec())
	return out, inDoubtErr(err)
}

// EffectTx runs fn, the command's effect name on the store's own
// database, in one transaction with its journal entry, so that it happens
// once or not at all: see node.EffectTx, which tools use, for the whole
// rule. Without an idempotency key (an invocation without an ID) fn still
// runs in a transaction, and nothing is journaled. An entry left started
// by an effect of this name run outside a transaction fails the command
// with the in-doubt error.
func EffectTx[S, T, X any](ctx *Context[S], name string, fn func(ctx context.Context, tx X) (T, error)) (T, error) {
	out, err := frame.EffectTx(ctx.f, name, fn)
	return out, inDoubtErr(err)
}

// inDoubtErr is err, or for an in-doubt suspension the in-doubt error: a
// command cannot suspend.
func inDoubtErr(err error) error {
	if sr, ok := errors.AsType[*instance.SuspendRequest](err); ok {
		return fmt.Errorf("%w: %s", instance.ErrEffectInDoubt, sr.Reason)
	}
	return err
}

// spec is cfg as package frame takes it.
func (cfg EffectConfig[T]) spec() frame.EffectSpec[T] {
	return frame.EffectSpec[T]{Input: cfg.Input, Reconcile: cfg.Reconcile, Timeout: cfg.Timeout}
}
