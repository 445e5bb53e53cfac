package frame

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/markov-agents/markov/instance"
)

// DefaultReconcileTimeout bounds a reconcile hook when its effect sets
// none.
const DefaultReconcileTimeout = 10 * time.Second

// EffectSpec is what an effect declares besides its function: its input
// (journaled as a digest) and how to settle it when it is in doubt.
type EffectSpec[T any] struct {
	Input     any
	Reconcile func(ctx context.Context, key string) (result T, found bool, err error)
	Timeout   time.Duration
}

// Effect runs fn, the external effect name of the handler call f, through
// the machine's journal (f.Journal): recorded as started before fn runs,
// done with its result (or failed) after. A call that runs again finds
// the entry: done, its result is returned and fn does not run; failed,
// its error; started but never ended, spec's Reconcile settles it (found:
// done with that result; not found: fn runs), and without one, or when
// it cannot tell, the call suspends in doubt (instance.InDoubt) for a
// person to decide. Without a journal or an idempotency key, fn just
// runs.
func Effect[T any](f *Frame, name string, fn func(ctx context.Context) (T, error), spec EffectSpec[T]) (T, error) {
	var zero T
	if err := f.claim(name); err != nil {
		return zero, err
	}
	key := f.Key()
	if f.Journal == nil || key == "" {
		return fn(f.Context)
	}
	key += "/" + name
	digest, err := digestOf(spec.Input)
	if err != nil {
		return zero, err
	}
	// The journal's writes outlive the call's context: an outcome is
	// recorded even when the handler's time ran out meanwhile.
	jctx := context.WithoutCancel(f.Context)
	e, created, err := f.Journal.BeginEffect(jctx, key, name, digest)
	if err != nil {
		return zero, fmt.Errorf("effect %s: %w", name, err)
	}
	if !created {
		if out, ok, err := ended[T](name, e); ok {
			return out, err
		}
		why := ""
		if e.Digest != digest {
			why = "its input changed since it started"
		} else if spec.Reconcile != nil {
			out, found, err := reconcile(f.Context, key, spec)
			switch {
			case err != nil:
				why = err.Error()
			case found:
				return out, end(jctx, f.Journal, key, out, nil)
			default:
				return run(jctx, f, key, fn)
			}
		}
		return zero, inDoubt(instance.InDoubt{Effect: name, Key: key, Digest: digest, StartedAt: e.StartedAt, Reconcile: why})
	}
	return run(jctx, f, key, fn)
}

// EffectTx runs fn, the database effect name of the handler call f, in a
// transaction of the machine's store (f.Journal, an instance.TxJournal)
// that records it done with fn's result: both commit, or neither. A call
// that runs again finds the entry: done, its result is returned and fn
// does not run; failed, its error; started (by an effect of this name run
// outside a transaction), the call suspends in doubt as Effect's does. An
// error or panic of fn rolls back its writes and the entry. X is the
// transaction's type fn takes (*sql.Tx, pgx.Tx); a store whose
// transaction is of another type, or that runs none, is
// instance.ErrEffectTx, and fn does not run.
func EffectTx[T, X any](f *Frame, name string, fn func(ctx context.Context, tx X) (T, error)) (T, error) {
	var zero T
	if err := f.claim(name); err != nil {
		return zero, err
	}
	tj, ok := f.Journal.(instance.TxJournal)
	if !ok {
		return zero, fmt.Errorf("%w: effect %s: no store to run it in (a durable runner on SQLite or PostgreSQL has one)", instance.ErrEffectTx, name)
	}
	key := f.Key()
	if key != "" {
		key += "/" + name
	}
	var out T
	e, ran, err := tj.RunEffectTx(f.Context, key, name, "", func(ctx context.Context, tx any) (raw []byte, err error) {
		x, ok := tx.(X)
		if !ok {
			return nil, fmt.Errorf("%w: effect %s takes a %s, and the store's transaction is a %T", instance.ErrEffectTx, name, reflect.TypeFor[X](), tx)
		}
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("effect %s: %w: %v", name, instance.ErrPanic, p)
			}
		}()
		if out, err = fn(ctx, x); err != nil {
			return nil, err
		}
		if raw, err = json.Marshal(out); err != nil {
			return nil, fmt.Errorf("effect %s: result does not encode: %w", name, err)
		}
		return raw, nil
	})
	switch {
	case err != nil:
		return zero, err
	case ran:
		return out, nil
	}
	if out, ok, err := ended[T](name, e); ok {
		return out, err
	}
	return zero, inDoubt(instance.InDoubt{Effect: name, Key: key, Digest: e.Digest, StartedAt: e.StartedAt})
}

// claim records that the call runs an effect name: a second one of the
// name is instance.ErrDuplicateEffect.
func (f *Frame) claim(name string) error {
	if f.effects[name] {
		return fmt.Errorf("%w: %q", instance.ErrDuplicateEffect, name)
	}
	if f.effects == nil {
		f.effects = map[string]bool{}
	}
	f.effects[name] = true
	return nil
}

// ended returns the outcome of effect name's journal entry e, and whether
// it ended: done, its result (decoded as T); failed, its error.
func ended[T any](name string, e instance.JournalEntry) (T, bool, error) {
	var out, zero T
	switch e.Status {
	case instance.EffectDone:
		if err := json.Unmarshal(e.Result, &out); err != nil {
			return zero, true, fmt.Errorf("effect %s: the journaled result does not decode: %w", name, err)
		}
		return out, true, nil
	case instance.EffectFailed:
		return zero, true, fmt.Errorf("effect %s failed: %s", name, e.Result)
	}
	return zero, false, nil
}

// run runs fn and journals its outcome under key.
func run[T any](jctx context.Context, f *Frame, key string, fn func(context.Context) (T, error)) (T, error) {
	out, err := fn(f.Context)
	if jerr := end(jctx, f.Journal, key, out, err); jerr != nil {
		return out, errors.Join(err, jerr)
	}
	return out, err
}

// end journals the outcome of effect key: out, or the failure err.
func end[T any](ctx context.Context, j instance.EffectJournal, key string, out T, err error) error {
	if err != nil {
		return j.EndEffect(ctx, key, true, []byte(err.Error()))
	}
	raw, merr := json.Marshal(out)
	if merr != nil {
		return fmt.Errorf("effect result does not encode: %w", merr)
	}
	return j.EndEffect(ctx, key, false, raw)
}

// reconcile asks spec's hook about effect key, within its timeout; a
// panic or the timeout is an error (it cannot tell).
func reconcile[T any](ctx context.Context, key string, spec EffectSpec[T]) (T, bool, error) {
	d := spec.Timeout
	if d <= 0 {
		d = DefaultReconcileTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type answer struct {
		out   T
		found bool
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{err: fmt.Errorf("%w: %v", instance.ErrPanic, p)}
			}
		}()
		out, found, err := spec.Reconcile(ctx, key)
		done <- answer{out, found, err}
	}()
	select {
	case a := <-done:
		return a.out, a.found, a.err
	case <-ctx.Done():
		var zero T
		return zero, false, fmt.Errorf("reconcile: %w", ctx.Err())
	}
}

// inDoubt is the suspension of effect d, in doubt.
func inDoubt(d instance.InDoubt) error {
	reason := fmt.Sprintf("effect %s is in doubt: it started at %s and its outcome was never recorded", d.Effect, d.StartedAt.UTC().Format(time.RFC3339))
	if d.Reconcile != "" {
		reason += " (" + d.Reconcile + ")"
	}
	meta := map[string]instance.InDoubt{instance.InDoubtKey: d}
	return instance.NewSuspendRequest(reason, instance.WithMetadata(meta), instance.WithPayloadSchema(json.RawMessage(instance.InDoubtSchema)))
}

// digestOf is the hex SHA-256 of v's JSON ("" for nil).
func digestOf(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("effect input does not encode: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}
