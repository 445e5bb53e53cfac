package executor

import (
	"context"

	"github.com/markov-agents/markov/internal/frame"
)

// limit runs fn on f within the timeout of tool t: its own, else
// the executor's ToolTimeout; none if both are zero, and fn then runs on the caller's
// goroutine. Otherwise fn runs on a goroutine of its own under a context
// that ends at the timeout. If fn has not returned by then, its goroutine
// is abandoned together with f: limit returns a nil frame and never reads
// f again, so what the handler returns or writes later is discarded. A
// handler that honours its context and fails because of the timeout gets
// the same error as one that ignores it.
func (e *standard) limit(ctx context.Context, t *frame.Tool, f *frame.Frame, fn func(*frame.Frame) (any, error)) (*frame.Frame, any, error) {
	d := t.Timeout
	if d == 0 {
		d = e.cfg.ToolTimeout
	}
	if d <= 0 {
		out, err := fn(f)
		return f, out, err
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	f.Context = tctx
	type result struct {
		out any
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := fn(f)
		done <- result{out, err}
	}()
	timedOut := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return &ToolTimeoutError{Tool: t.Spec.Name, After: d}
	}
	select {
	case r := <-done:
		if r.err != nil && tctx.Err() != nil {
			return nil, nil, timedOut()
		}
		return f, r.out, r.err
	case <-tctx.Done():
		return nil, nil, timedOut()
	}
}
