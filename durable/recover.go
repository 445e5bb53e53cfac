package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Recover continues the runs that were cut short: every stored machine
// that no run holds, that has nothing pending and whose last run did not
// end — its process died, or was stopped, after an input was accepted
// (AcceptResume, AcceptCancel, AcceptInvoke) or a step saved — is run
// with no input until its run ends, as its next run would have. Machines
// that never ran, that await a resume or whose run ended are left alone,
// so Recover may be called at every start of a process (markov serve
// does, on SQLite: a fleet's jobs are retried by River instead). It returns how many machines it continued; the runs
// that failed are logged and their errors joined, and the others go on.
// It reads every machine's Status (its tree and the end of its history):
// a startup task, not a loop. A store that is
// not a store.MachineLister fails with ErrUnsupported; ctx ending stops
// it, each machine at its last save.
func (r *Runner) Recover(ctx context.Context) (int, error) {
	ids, err := r.Machines(ctx)
	if err != nil {
		return 0, fmt.Errorf("recover: %w", err)
	}
	n := 0
	var errs []error
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return n, errors.Join(append(errs, err)...)
		}
		cut, err := r.cutShort(ctx, id)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("recover %s: %w", id, err))
			continue
		case !cut:
			continue // running, awaiting a resume, done, or never run
		}
		r.log.LogAttrs(ctx, slog.LevelInfo, "continuing a run cut short", slog.String("machine", id))
		if err := r.drain(ctx, id); err != nil {
			r.log.LogAttrs(ctx, slog.LevelError, "continue a run cut short", slog.String("machine", id), slog.String("error", err.Error()))
			errs = append(errs, fmt.Errorf("recover %s: %w", id, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// cutShort reports whether machine id's last run was cut short: its
// Status is idle (no run holds it, nothing is pending, a leaf has work
// left) and it has history (it ran).
func (r *Runner) cutShort(ctx context.Context, id string) (bool, error) {
	st, err := r.Status(ctx, id)
	return err == nil && st.State == StateIdle && st.Messages > 0, err
}

// drain runs machine id with no input to the end of its run (or its
// first error).
func (r *Runner) drain(ctx context.Context, id string) error {
	for _, err := range r.Run(ctx, id) {
		if err != nil {
			return err
		}
	}
	return nil
}
