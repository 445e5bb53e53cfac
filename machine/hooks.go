package machine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
)

// DefaultHookTimeout bounds a hook call when Hooks.Timeout is zero.
const DefaultHookTimeout = 10 * time.Second

// Hooks are a charter's lifecycle hooks on suspensions. Both run in the
// process that runs the machine — under a durable runner, inside the
// machine's hold, before the save that records what they saw — so a
// suspension, or its resolution, that a save recorded never meets its
// hook again: a retry after a crash before that save runs it again. A
// hook that panics or outlives Timeout is logged (CharterConfig.Logger);
// for OnSuspend it is a refusal.
type Hooks struct {
	// OnSuspend is called for every suspension a tool, a command, a
	// transition or a caller (Machine.Suspend) asks for, before it is
	// recorded: call is its record — kind, name, input, reason, metadata,
	// deadline and on-timeout action, payload schema — and node the node
	// of the instance that asked. The hook may set call.Metadata (to add
	// a ticket number, say); other changes are ignored. An error refuses
	// the suspension (ErrSuspendRefused): notify a channel, or enforce a
	// policy ("no approvals outside business hours") here.
	OnSuspend func(ctx context.Context, node string, call *instance.SuspendedCall) error
	// OnResolved is called once for every suspension resolved, expired or
	// cancelled, with its lifecycle event: the cause, who decided (By),
	// the signal. It runs when the run commits the change, before the
	// step that reports it is yielded.
	OnResolved func(ctx context.Context, e instance.Event)
	// Timeout bounds each hook call (DefaultHookTimeout if zero). A hook
	// that ignores its context is abandoned when it runs out.
	Timeout time.Duration
}

// call runs hook fn within the hooks' timeout, turning a panic or the
// timeout into an error, which it logs.
func (h *Hooks) call(ctx context.Context, log *slog.Logger, name string, fn func(ctx context.Context) error) error {
	d := h.Timeout
	if d <= 0 {
		d = DefaultHookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("%w: %v", instance.ErrPanic, p)
			}
		}()
		done <- fn(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = fmt.Errorf("hook %s: %w", name, ctx.Err())
	}
	if err != nil {
		log.WarnContext(ctx, "markov: hook failed", "hook", name, "error", err)
	}
	return err
}

// admit is the machine's executor.Admission: a chosen suspend ID must be
// free (SetSuspendIDCheck), and the charter's OnSuspend hook must accept
// the suspension; the decider (SetDecider) is asked about it last.
func (m *Machine) admit(ctx context.Context, node string, call *instance.SuspendedCall, chosen bool) error {
	if chosen {
		if err := m.claimID(ctx, m.root, call.SuspendID); err != nil {
			return err
		}
	}
	h := &m.charter.hooks
	if h.OnSuspend != nil {
		c := call.Clone()
		err := h.call(ctx, m.charter.logger, "OnSuspend", func(ctx context.Context) error { return h.OnSuspend(ctx, node, &c) })
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSuspendRefused, err)
		}
		call.Metadata = c.Metadata
	}
	if err := governCall(ctx, node, call); err != nil {
		return err
	}
	m.rule(ctx, node, call)
	return nil
}

// admission returns m.admit as an executor.Admission, the same value every
// time (see Machine.admitFn).
func (m *Machine) admission() executor.Admission {
	if m.admitFn == nil {
		m.admitFn = m.admit
	}
	return m.admitFn
}

// resolved tells the charter's OnResolved hook of resolution event e.
func (m *Machine) resolved(ctx context.Context, e instance.Event) {
	if h := &m.charter.hooks; h.OnResolved != nil {
		_ = h.call(ctx, m.charter.logger, "OnResolved", func(ctx context.Context) error {
			h.OnResolved(ctx, e)
			return nil
		})
	}
}
