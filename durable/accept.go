package durable

import (
	"context"
	"fmt"
	"sync"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// Accepted is an input durably accepted for a machine: a resume, a
// cancellation or a command that will be applied whatever happens to the
// caller. [Runner.AcceptResume] and its siblings return one once the input
// is applied and saved, the rest of the run going on in the background;
// package fleet returns one once the input is committed with the job
// that applies it. [Runner.Await] waits for the run that applies it.
type Accepted struct {
	// MachineID is the machine the input is for.
	MachineID string
	// SuspendID is the suspension a resume or a cancellation resolves;
	// empty for a command.
	SuspendID string
	// Command is the name of an accepted command; empty otherwise.
	Command string
	// InboxID identifies the input in a fleet's inbox; 0 when the runner
	// applied it at once.
	InboxID int64
	// Revision is the revision whose save applied the input, when the
	// runner applied it at once; 0 while it waits in an inbox.
	Revision int64
	// LogSeq is the last sequence number of the machine's event log when
	// the input was accepted: the events of the run that applies it come
	// after it (Await watches from there when the run is elsewhere).
	LogSeq int64
	// run is the run that applies the input in this process; nil for an
	// input accepted elsewhere.
	run *background
}

// background is a run that continues after its input was accepted.
type background struct {
	done   chan struct{}
	cancel context.CancelFunc
	// steps and err are the run's, set before done is closed.
	steps []machine.Step
	err   error
}

// backgroundRuns tracks a Runner's runs in the background, so that Wait
// can drain them.
type backgroundRuns struct {
	mu   sync.Mutex
	runs map[*background]struct{}
	wg   sync.WaitGroup
}

// AcceptResume applies the resume in to the machine holding its
// suspension and saves it, then returns: the rest of the run (the model
// calls it makes) goes on in the background, under the machine's hold,
// until it ends or [Runner.Wait] cancels it. The errors are Resume's —
// an unknown suspension, one already resolved, a payload the suspension
// refuses — and then nothing is saved. Of concurrent acceptances of one
// suspension exactly one succeeds; the others fail as soon as its input
// is saved, not after its run. An acceptance for a machine whose
// accepted run still goes on otherwise waits for that run (bound it with
// ctx).
//
// The input is durable once this returns: if the process dies before the
// run ends, the machine is left at its last save, with the input applied
// and the run's remaining work pending; the next run of the machine
// (Run with or without inputs, a resume of another suspension, a command)
// continues it, and [Runner.Status] reports it idle until then.
func (r *Runner) AcceptResume(ctx context.Context, in machine.ResumeInput) (Accepted, error) {
	return r.acceptBySuspension(ctx, in.SuspendID, in)
}

// AcceptCancel accepts the cancellation in as AcceptResume accepts a
// result: the call gets the error result "cancelled: reason", and the
// history names who cancelled it (in.By), when set.
func (r *Runner) AcceptCancel(ctx context.Context, in machine.CancelInput) (Accepted, error) {
	if in.By != "" {
		// A person's cancellation is checked against the call's policy
		// first, so that a refusal is audited (Cancel).
		sus, err := r.pendingEntry(ctx, in.SuspendID)
		if err != nil {
			return Accepted{}, err
		}
		if err := r.CheckCancel(ctx, sus.MachineID, in); err != nil {
			return Accepted{}, err
		}
	}
	return r.acceptBySuspension(ctx, in.SuspendID, in)
}

// AcceptInvoke runs command inv on machine machineID and saves its
// outcome, then returns as AcceptResume does. A command that fails (an
// unknown command, input failing its schema, an error of its handler)
// returns the error, with nothing saved.
func (r *Runner) AcceptInvoke(ctx context.Context, machineID string, inv command.Invocation) (Accepted, error) {
	h, err := r.Hold(ctx, machineID)
	if err != nil {
		return Accepted{}, fmt.Errorf("hold machine %s: %w", machineID, err)
	}
	a, err := r.accept(ctx, h, inv)
	a.Command = inv.Name
	return a, err
}

// AcceptContinue continues machine id's run in the background, as a Run
// with no input does: the next try of a machine whose run was cut short
// or failed (Status idle), or that was parked, when an operator asks for
// it. It returns once the machine is held and loaded; the run goes on
// as AcceptResume's does (Await it; Wait ends it; Config.Retry retries
// it). A machine a run holds now fails at once with an error wrapping
// ErrBusy, an unknown one with store.ErrNotFound.
func (r *Runner) AcceptContinue(ctx context.Context, id string) (Accepted, error) {
	if err := store.CheckID(id); err != nil {
		return Accepted{}, fmt.Errorf("continue machine: %w: %w", store.ErrNotFound, err)
	}
	h, ok, err := r.TryHold(ctx, id)
	switch {
	case err != nil:
		return Accepted{}, fmt.Errorf("hold machine %s: %w", id, err)
	case !ok:
		return Accepted{}, fmt.Errorf("continue machine %s: %w", id, ErrBusy)
	}
	return r.accept(ctx, h)
}

// acceptBySuspension accepts in for the machine holding suspendID. While
// another acceptance's run holds the machine, it waits for the hold, but
// wakes whenever an acceptance of that machine is saved: if suspendID is
// no longer pending then, it fails at once with ErrAlreadyResolved rather
// than after the winner's whole run.
func (r *Runner) acceptBySuspension(ctx context.Context, suspendID string, in machine.Input) (Accepted, error) {
	for {
		sus, err := r.pendingEntry(ctx, suspendID)
		if err != nil {
			return Accepted{}, err
		}
		applied := r.applied.next(sus.MachineID)
		if _, err := r.pendingEntry(ctx, suspendID); err != nil {
			return Accepted{}, err // resolved since the first look
		}
		h, err := r.holdUntil(ctx, sus.MachineID, applied)
		if err != nil {
			return Accepted{}, fmt.Errorf("hold machine %s: %w", sus.MachineID, err)
		}
		if h == nil {
			continue // an acceptance was saved: look again
		}
		a, err := r.accept(ctx, h, in)
		a.SuspendID = suspendID
		return a, err
	}
}

// holdUntil is Hold, except that it gives up with a nil Hold and no
// error when woken is closed first.
func (r *Runner) holdUntil(ctx context.Context, id string, woken <-chan struct{}) (*Hold, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-woken:
			cancel()
		case <-stop:
		}
	}()
	h, err := r.Hold(wctx, id)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, nil
	}
	return h, err
}

// appliedSignals wakes, per machine, the acceptances waiting for its hold
// when another acceptance of the machine is saved.
type appliedSignals struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// next returns the channel closed at the next acceptance saved for id.
func (a *appliedSignals) next(id string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ch == nil {
		a.ch = map[string]chan struct{}{}
	}
	ch := a.ch[id]
	if ch == nil {
		ch = make(chan struct{})
		a.ch[id] = ch
	}
	return ch
}

// notify wakes the waiters of id.
func (a *appliedSignals) notify(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch := a.ch[id]; ch != nil {
		close(ch)
		delete(a.ch, id)
	}
}

// accept applies inputs (none: the run goes on) to the machine h holds
// and saves it, and hands the rest of the run, with the hold, to a
// goroutine. It takes the hold's ownership: released on failure, or when
// the run ends.
func (r *Runner) accept(ctx context.Context, h *Hold, inputs ...machine.Input) (Accepted, error) {
	id := h.MachineID()
	s, err := r.loadHeld(ctx, id)
	if err != nil {
		h.Release()
		return Accepted{}, err
	}
	s.rec = r.newRecorder(id)
	applied, err := s.apply(ctx, inputs)
	if err != nil {
		s.journal.close(ctx)
		s.rec.close()
		h.Release()
		return Accepted{}, err
	}
	r.applied.notify(id)
	a := Accepted{MachineID: id, Revision: s.rev}
	a.run = r.bg.start(ctx, func(ctx context.Context, b *background) {
		defer func() {
			if b.err != nil {
				r.retryLater(ctx, id, b.err) // the hold released: a retry takes it again
			}
		}()
		defer h.Release()
		defer s.rec.close()
		defer s.journal.close(ctx)
		s.proceed(ctx, applied, func(st machine.Step, err error) bool {
			if err != nil {
				b.err = err
				return false
			}
			b.steps = append(b.steps, st)
			return true
		})
	})
	return a, nil
}

// start runs fn on a goroutine of its own, with a context that keeps
// ctx's values but not its cancellation; Wait cancels it.
func (b *backgroundRuns) start(ctx context.Context, fn func(context.Context, *background)) *background {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &background{done: make(chan struct{}), cancel: cancel}
	b.mu.Lock()
	if b.runs == nil {
		b.runs = map[*background]struct{}{}
	}
	b.runs[run] = struct{}{}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		defer func() {
			b.mu.Lock()
			delete(b.runs, run)
			b.mu.Unlock()
			cancel()
			close(run.done)
		}()
		fn(ctx, run)
	}()
	return run
}

// Wait waits for the runs that accepted inputs left in the background
// ([Runner.AcceptResume], AcceptCancel, AcceptInvoke) to end. When ctx
// ends first, it cancels them, waits for them to stop — each machine is
// left at its last save, and its next run continues it — and returns
// ctx's error. A server calls it on shutdown, after it stopped taking
// requests.
func (r *Runner) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		r.bg.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	r.bg.mu.Lock()
	for run := range r.bg.runs {
		run.cancel()
	}
	r.bg.mu.Unlock()
	<-done
	return ctx.Err()
}

// Await waits for the run that applies the accepted input a to end and
// returns its steps (the command step of an invocation first). For an
// input this runner accepted, it waits for the run in the background;
// for one accepted elsewhere (package fleet), it watches the machine's
// event log after a.LogSeq for the run that applies the input — the one
// that reports the resolution of a.SuspendID, or the step of command
// a.Command — which needs the store to keep an event log (otherwise
// ErrUnsupported). When ctx ends first it returns ctx's error; the run
// goes on. A run that fails returns its error, with the input applied.
func (r *Runner) Await(ctx context.Context, a Accepted) ([]machine.Step, error) {
	if a.run == nil {
		return r.awaitLog(ctx, a)
	}
	select {
	case <-a.run.done:
		return a.run.steps, a.run.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// awaitLog follows the event log of a's machine for the run that applies
// a: from the event that shows the input applied to the first step that
// ends a run.
func (r *Runner) awaitLog(ctx context.Context, a Accepted) ([]machine.Step, error) {
	var steps []machine.Step
	started := false
	for e, err := range r.Watch(ctx, a.MachineID, a.LogSeq) {
		if err != nil {
			return nil, err
		}
		if e.Live {
			continue // the log brings it again (as an Echo, content kept)
		}
		if !started {
			started = appliesInput(e.Event, a)
		}
		if !started || e.Kind != machine.EventStep {
			continue
		}
		steps = append(steps, *e.Step)
		if e.Step.Done {
			return steps, nil
		}
	}
	return nil, ctx.Err() // Watch ends with an error, ctx's when it is done
}

// appliesInput reports whether e is the first event of the run that
// applies a: the resolution of its suspension, its command's step, or for
// a user message (fleet.Fleet.Send) the first step after its acceptance (a
// step does not show the caller's own input; a machine's inbox is applied
// in order, so a run after the acceptance takes the message in).
func appliesInput(e machine.Event, a Accepted) bool {
	switch {
	case a.SuspendID != "":
		return e.Lifecycle != nil && e.Lifecycle.SuspendID == a.SuspendID &&
			(e.Kind == machine.EventResumed || e.Kind == machine.EventCancelled)
	case a.Command != "":
		return e.Kind == machine.EventStep && e.Step.Command != nil && e.Step.Command.Name == a.Command
	}
	return e.Kind == machine.EventStep
}
