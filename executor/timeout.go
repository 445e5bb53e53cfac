package executor

import (
	"context"
	"encoding/json"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
)

// handlerCall is the handler call limit makes: tool's handler on input,
// or with resume set, its resume handler on that resolution. It is a
// value, not a closure, so that a call without a timeout allocates
// nothing for it.
type handlerCall struct {
	tool   *frame.Tool
	input  json.RawMessage
	resume *instance.Resolution
}

// run calls the handler on f.
func (c handlerCall) run(f *frame.Frame) (any, error) {
	if c.resume != nil {
		return frame.CallResume(c.tool.Resume, f, c.input, *c.resume)
	}
	return frame.Call(c.tool.Run, f, c.input)
}

// limit makes call c on f within the timeout of c's tool: its own, else
// the executor's ToolTimeout; none if both are zero, and c then runs on the caller's
// goroutine. Otherwise c runs on a goroutine of its own under a context
// that ends at the timeout. If c has not returned by then, its goroutine
// is abandoned together with f: limit returns a nil frame and never reads
// f again, so what the handler returns or writes later is discarded. A
// handler that honours its context and fails because of the timeout gets
// the same error as one that ignores it.
func (e *standard) limit(ctx context.Context, f *frame.Frame, c handlerCall) (*frame.Frame, any, error) {
	t := c.tool
	d := t.Timeout
	if d == 0 {
		d = e.cfg.ToolTimeout
	}
	if d <= 0 {
		out, err := c.run(f)
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
		out, err := c.run(f)
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
