package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/markov-agents/markov/store"
)

// Work is one job of the fleet as an operator sees it: a run of a machine
// (markov_run) or a deadline (markov_expire).
type Work struct {
	// Job is the River job ID; Kind its kind.
	Job  int64
	Kind string
	// MachineID is the machine the job works; SuspendID the suspension a
	// deadline job expires.
	MachineID string
	SuspendID string
	// Attempt counts the attempts so far.
	Attempt int
	// At is when the job is due (queued, scheduled, failing), started its
	// attempt (running) or was given up (parked).
	At time.Time
	// Errors are the errors of the attempts so far, oldest first.
	Errors []string
}

// Overview is what the fleet is doing, across every process: runs in
// progress, work waiting for a worker, deadlines and retries to come, and
// the failures. Each list holds at most the limit given to
// [Fleet.Overview].
type Overview struct {
	// Running are jobs a worker is on now, longest running first.
	Running []Work
	// Queued are jobs due now, waiting for a free worker, oldest first.
	Queued []Work
	// Scheduled are jobs due later (deadlines), soonest first: only the
	// deadlines of suspensions still pending (a deadline job outlives a
	// suspension resolved before it, and finds nothing at its time).
	Scheduled []Work
	// Failing are jobs whose last attempt failed and that will be tried
	// again, soonest first.
	Failing []Work
	// Parked are jobs given up after their last attempt (see
	// [Fleet.Parked]), most recent first.
	Parked []Work
}

// Overview returns the fleet's work at this moment (at most limit jobs in
// each list; limit ≤ 0: 100), read from River's job table.
func (f *Fleet) Overview(ctx context.Context, limit int) (Overview, error) {
	if limit <= 0 {
		limit = 100
	}
	var o Overview
	for _, l := range []struct {
		to    *[]Work
		state rivertype.JobState
		by    river.JobListOrderByField
		dir   river.SortOrder
	}{
		{&o.Running, rivertype.JobStateRunning, river.JobListOrderByTime, river.SortOrderAsc},
		{&o.Queued, rivertype.JobStateAvailable, river.JobListOrderByTime, river.SortOrderAsc},
		{&o.Scheduled, rivertype.JobStateScheduled, river.JobListOrderByScheduledAt, river.SortOrderAsc},
		{&o.Failing, rivertype.JobStateRetryable, river.JobListOrderByScheduledAt, river.SortOrderAsc},
		{&o.Parked, rivertype.JobStateDiscarded, river.JobListOrderByFinalizedAt, river.SortOrderDesc},
	} {
		res, err := f.client.JobList(ctx, river.NewJobListParams().Kinds(kindRun, kindExpire).
			States(l.state).OrderBy(l.by, l.dir).First(limit))
		if err != nil {
			return Overview{}, fmt.Errorf("fleet: overview: %w", err)
		}
		for _, j := range res.Jobs {
			*l.to = append(*l.to, work(j))
		}
	}
	o.Scheduled = slices.DeleteFunc(o.Scheduled, func(w Work) bool { return f.settled(ctx, w) })
	return o, nil
}

// settled reports whether w is a deadline job whose suspension is no
// longer pending (or is gone with its machine); one the index cannot be
// asked about now stays shown.
func (f *Fleet) settled(ctx context.Context, w Work) bool {
	if w.Kind != kindExpire {
		return false
	}
	s, err := f.cfg.Store.FindSuspension(ctx, w.SuspendID)
	if err != nil {
		return errors.Is(err, store.ErrNotFound)
	}
	return s.Status != store.StatusPending
}

// work describes job j.
func work(j *rivertype.JobRow) Work {
	var a expireArgs                      // a superset of runArgs
	_ = json.Unmarshal(j.EncodedArgs, &a) // our own args; a foreign row shows without IDs
	w := Work{Job: j.ID, Kind: j.Kind, MachineID: a.MachineID, SuspendID: a.SuspendID, Attempt: j.Attempt, At: j.ScheduledAt}
	switch {
	case j.State == rivertype.JobStateRunning && j.AttemptedAt != nil:
		w.At = *j.AttemptedAt
	case j.State == rivertype.JobStateDiscarded && j.FinalizedAt != nil:
		w.At = *j.FinalizedAt
	}
	for _, e := range j.Errors {
		w.Errors = append(w.Errors, e.Error)
	}
	return w
}
