package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// takeOverError is the error a taken-over job's attempt records.
const takeOverError = "taken over: its machine's lock was released while the job was running (its worker died)"

// takeOverLoop takes over the jobs of dead workers, and makes the jobs
// whose time has come available, every half Config.TakeOverAfter until
// ctx ends.
func (f *Fleet) takeOverLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.TakeOverAfter / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := f.makeDue(ctx); err != nil && ctx.Err() == nil {
			f.log.LogAttrs(ctx, slog.LevelWarn, "making due jobs available", slog.String("error", err.Error()))
		}
		n, err := f.takeOver(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			f.log.LogAttrs(ctx, slog.LevelWarn, "taking over the jobs of dead workers", slog.String("error", err.Error()))
		case n > 0:
			f.log.LogAttrs(ctx, slog.LevelInfo, "took over the jobs of dead workers", slog.Int("jobs", n))
		}
	}
}

// makeDue makes the run and deadline jobs whose scheduled time has passed
// available (queries.due), waking the workers.
func (f *Fleet) makeDue(ctx context.Context) error {
	var n int
	return f.cfg.Store.Pool().QueryRow(ctx, f.q.due, f.cfg.Store.Schema()+".river_insert").Scan(&n)
}

// takeOver makes available again the run and deadline jobs that have been
// running for more than Config.TakeOverAfter while no session holds their
// machine's lock: a worker holds it for the whole of a job once it has
// fetched it, and PostgreSQL released it when the worker's process died.
// A job out of attempts is discarded instead (its machine is parked), as
// River's rescuer does. It returns how many jobs it took over.
//
// A job taken over while its worker still lives (one slower than
// TakeOverAfter to take the lock after fetching the job) is harmless: one
// of the two finds the machine held and snoozes, as a rescued job does.
func (f *Fleet) takeOver(ctx context.Context) (int, error) {
	pool := f.cfg.Store.Pool()
	after := f.cfg.TakeOverAfter.Seconds()
	rows, err := pool.Query(ctx, f.q.stuck, after)
	if err != nil {
		return 0, err
	}
	type stuckJob struct {
		id      int64
		machine string
	}
	stuck, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stuckJob, error) {
		var j stuckJob
		err := r.Scan(&j.id, &j.machine)
		return j, err
	})
	if err != nil || len(stuck) == 0 {
		return 0, err
	}
	machines := make([]string, len(stuck))
	for i, j := range stuck {
		machines[i] = j.machine
	}
	held, err := f.cfg.Store.MachinesLocked(ctx, machines)
	if err != nil {
		return 0, err
	}
	busy := make(map[string]bool, len(held))
	for _, id := range held {
		busy[id] = true
	}
	var free []int64
	for _, j := range stuck {
		if !busy[j.machine] {
			free = append(free, j.id)
		}
	}
	if len(free) == 0 {
		return 0, nil
	}
	// Still running since before TakeOverAfter: not finished, nor fetched
	// again, since the look.
	var n int
	if err := pool.QueryRow(ctx, f.q.takeOver, free, after, takeOverError, f.cfg.Store.Schema()+".river_insert").Scan(&n); err != nil {
		return 0, fmt.Errorf("take over jobs: %w", err)
	}
	return n, nil
}
