package executor

import (
	"context"

	"github.com/markov-agents/markov/internal/access"
)

func init() {
	access.Stepper = func(exec any) func(ctx context.Context, req any, spare *any) (any, error) {
		e, ok := exec.(*standard)
		if !ok {
			return nil
		}
		return e.spareStep
	}
}

// stepSpare runs the step req (a *StepRequest) in the scratch *spare,
// cleared, or in a new one it leaves there, and returns its result (a
// *StepResult): the scratch of a step whose result was applied serves the
// step of the next round.
func (e *standard) stepSpare(ctx context.Context, req any, spare *any) (any, error) {
	s, ok := (*spare).(*scratch)
	if ok {
		*s = scratch{}
	} else {
		s = new(scratch)
		*spare = s
	}
	return e.stepIn(ctx, req.(*StepRequest), s)
}
