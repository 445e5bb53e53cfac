package a2a

// This file is the server's background work: the outbox's deliveries,
// and the tasks whose executions stopped while they waited on decisions
// made elsewhere, brought up to date when their machines move on.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/markov-agents/markov/durable"
)

// Run does the server's background work until ctx ends, then returns
// nil: every RunInterval, and as soon as this process adds to the
// outbox, it
//
//   - delivers the push notifications due in the outbox (see
//     ServerConfig.PushSender), in any process that serves the store;
//   - brings up to date the auth-required tasks no execution follows in
//     this process (the process that followed them stopped): once the
//     console, the HTTP API or a Go caller decided what they waited on
//     and the machine's run ended, the task is completed, input-required
//     or auth-required again, as its execution would have made it, and
//     its push notifications go out.
//
// markov a2a runs it. A server nobody runs Run for sends no push
// notifications.
func (s *Server) Run(ctx context.Context) error {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		s.catchUp(ctx)
		s.outbox.deliver(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.outbox.added:
		}
	}
}

// catchUp brings up to date the auth-required tasks no execution of
// this process follows.
func (s *Server) catchUp(ctx context.Context) {
	for token := ""; ctx.Err() == nil; {
		res, err := s.tasks.List(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateAuthRequired, PageSize: 100, PageToken: token})
		if err != nil {
			s.logger.Warn("a2a: list the auth-required tasks", "err", err)
			return
		}
		for _, task := range res.Tasks {
			if _, here := s.following.Load(task.ID); here {
				continue
			}
			if err := s.catchUpTask(ctx, task.ID); err != nil && ctx.Err() == nil {
				s.logger.Warn("a2a: bring a task up to date", "task", task.ID, "err", err)
			}
		}
		if res.NextPageToken == "" {
			return
		}
		token = res.NextPageToken
	}
}

// catchUpTask brings task id up to date when its machine decided what
// the task waits on and is at rest; it does nothing otherwise.
func (s *Server) catchUpTask(ctx context.Context, id a2a.TaskID) error {
	st, err := s.tasks.Get(ctx, id)
	if err != nil {
		return err
	}
	task := st.Task
	if task.Status.State != a2a.TaskStateAuthRequired {
		return nil
	}
	mid := MachineID(task.ContextID)
	status, err := s.runner.Status(ctx, mid)
	if err != nil {
		return err
	}
	if status.State != durable.StateDone && status.State != durable.StateAwaitingResume {
		return nil // a run goes on (or was cut short): later
	}
	issued := issuedIDs(task)
	for _, p := range status.Pending {
		if slices.Contains(issued, p.ID) {
			return nil // still waiting
		}
	}
	// The events the task's execution would have ended with: finish
	// stops at the first status.
	ec := &a2asrv.ExecutorContext{TaskID: task.ID, ContextID: task.ContextID}
	var events []a2a.Event
	var failed error
	s.finish(ctx, &turn{ec: ec, yield: func(ev a2a.Event, err error) bool {
		if err != nil {
			failed = err
			return false
		}
		events = append(events, ev)
		_, status := ev.(*a2a.TaskStatusUpdateEvent)
		return !status
	}}, mid)
	if failed != nil {
		return failed
	}
	for _, ev := range events {
		apply(task, ev)
	}
	if _, err := s.tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, Event: events[len(events)-1], PrevVersion: st.Version}); err != nil {
		if errors.Is(err, taskstore.ErrConcurrentModification) {
			return nil // another process brought it up to date
		}
		return err
	}
	configs, err := s.pushes.List(ctx, id)
	if err != nil {
		return fmt.Errorf("push configs: %w", err)
	}
	for _, c := range configs {
		for _, ev := range events {
			if err := s.sender.SendPush(ctx, c, ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply applies an event of the task's execution to task, as the SDK
// does: an artifact update replaces (or appends to) its artifact, a
// status update makes the status, the previous status message going to
// the history.
func apply(task *a2a.Task, ev a2a.Event) {
	switch v := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		i := slices.IndexFunc(task.Artifacts, func(a *a2a.Artifact) bool { return a != nil && a.ID == v.Artifact.ID })
		switch {
		case i < 0:
			task.Artifacts = append(task.Artifacts, v.Artifact)
		case v.Append:
			task.Artifacts[i].Parts = append(task.Artifacts[i].Parts, v.Artifact.Parts...)
		default:
			task.Artifacts[i] = v.Artifact
		}
	case *a2a.TaskStatusUpdateEvent:
		if task.Status.Message != nil {
			task.History = append(task.History, task.Status.Message)
		}
		task.Status = v.Status
	}
}

// storedHandler is the server's request handler: the SDK's, and a
// subscription to a task whose execution runs in no process here (it
// was made by another process, or by one that stopped) served from the
// store and the machine's event log.
type storedHandler struct {
	a2asrv.RequestHandler
	s *Server
}

// SubscribeToTask implements a2asrv.RequestHandler: the SDK's
// subscription to an execution of this process, or else the stored task,
// then the machine's events as its runs go on and the task's new
// statuses (brought up to date here for an auth-required task, written
// by another process's execution otherwise) — until it is done or asks
// its client for input.
func (h storedHandler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		first := true
		for ev, err := range h.RequestHandler.SubscribeToTask(ctx, req) {
			if first && errors.Is(err, a2a.ErrTaskNotFound) && req != nil && h.s.subscribeStored(ctx, req.ID, yield) {
				return
			}
			first = false
			if !yield(ev, err) {
				return
			}
		}
	}
}

// subscribeLook is how many RunIntervals a subscription served from the
// store follows the machine's log before it looks at the task again.
const subscribeLook = 5

// subscribeStored serves a subscription to stored task id; false when
// there is no such task (the SDK's error stands).
func (s *Server) subscribeStored(ctx context.Context, id a2a.TaskID, yield func(a2a.Event, error) bool) bool {
	st, err := s.tasks.Get(ctx, id)
	if err != nil {
		return false
	}
	if !yield(st.Task, nil) {
		return true
	}
	mid := MachineID(st.Task.ContextID)
	// Until the task is done or asks its client: an auth-required task
	// waits on a decision, a working one on a run another process's
	// execution writes.
	for !st.Task.Status.State.Terminal() && st.Task.Status.State != a2a.TaskStateInputRequired {
		l, err := s.runner.LoadAt(ctx, mid)
		if err == nil {
			err = s.catchUpTask(ctx, id)
		}
		var now *taskstore.StoredTask
		if err == nil {
			now, err = s.tasks.Get(ctx, id)
		}
		if err != nil {
			yield(nil, err)
			return true
		}
		if now.Version != st.Version {
			st = now
			ev := &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: st.Task.ContextID, Status: st.Task.Status}
			if !yield(ev, nil) {
				return true
			}
			continue
		}
		if status, err := s.runner.Status(ctx, mid); err == nil && (status.State == durable.StateRunning || status.State == durable.StateIdle) {
			// A run ends (or was cut short, for the next to continue):
			// look again shortly.
			select {
			case <-ctx.Done():
				return true
			case <-time.After(s.every):
			}
			continue
		}
		// Nothing decided yet: stream the machine's next run, for a while
		// at a time — a run that ended between the looks above is caught
		// by the next catch-up.
		ec := &a2asrv.ExecutorContext{TaskID: id, ContextID: st.Task.ContextID}
		fctx, cancel := context.WithTimeout(ctx, subscribeLook*s.every)
		followed := s.follow(fctx, &turn{ec: ec, yield: yield}, mid, l.EventSeq)
		timedOut := fctx.Err() != nil
		cancel()
		if ctx.Err() != nil || (!followed && !timedOut) {
			return true // the subscriber is gone
		}
	}
	return true
}
