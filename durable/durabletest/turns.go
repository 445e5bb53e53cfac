package durabletest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// DefaultStart is where a scenario's clock starts when Scenario.Start is
// zero.
var DefaultStart = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Turn is one input of a scenario's conversation: a message, a decision,
// a command, time passing, or an action of the test's own. The kit sends
// each turn once its run of the one before ended, and after a crash sends
// the turns the store does not hold yet (see [Scenario.Turns]).
type Turn struct {
	name    string
	advance time.Duration
	do      func(ctx context.Context, r *durable.Runner, env Env) error
}

// String names the turn, for an error.
func (t Turn) String() string { return t.name }

// Say is the user's message text.
func Say(text string) Turn {
	return Do(fmt.Sprintf("say %q", text), func(ctx context.Context, r *durable.Runner, _ Env) error {
		return drain(r.Run(ctx, MachineID, machine.UserText(text)))
	})
}

// Resume resumes the machine's first pending call of tool with payload,
// as a person deciding in an inbox would (By "durabletest"), and runs the
// machine to the end of its run. A payload the call refuses is an error.
func Resume(tool string, payload any) Turn {
	return Do("resume "+tool, func(ctx context.Context, r *durable.Runner, _ Env) error {
		c, err := PendingCall(ctx, r, tool)
		if err != nil {
			return err
		}
		run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: c.SuspendID, Payload: payload, By: "durabletest"})
		if err != nil {
			return err
		}
		return drain(run.Steps())
	})
}

// PendingCall is the first call of tool pending on the machine of r's
// scenario (MachineID), for a Do turn that decides it its own way; none
// is an ErrScenario.
func PendingCall(ctx context.Context, r *durable.Runner, tool string) (instance.SuspendedCall, error) {
	m, _, err := r.Load(ctx, MachineID)
	if err != nil {
		return instance.SuspendedCall{}, err
	}
	for _, c := range m.Pending() {
		if c.Name == tool {
			return c, nil
		}
	}
	return instance.SuspendedCall{}, fmt.Errorf("%w: no call of %s is pending", ErrScenario, tool)
}

// Invoke invokes a command on the machine and runs it to the end of its
// run.
func Invoke(inv command.Invocation) Turn {
	return Do("invoke "+inv.Name, func(ctx context.Context, r *durable.Runner, _ Env) error {
		run, err := r.Invoke(ctx, MachineID, inv)
		if err != nil {
			return err
		}
		return drain(run.Steps())
	})
}

// Advance moves the scenario's clock (Env.Now) forward by d, then sweeps
// (durable.Runner.Sweep): the suspensions whose deadline passed are
// resolved by their on-timeout action, their machine run on.
func Advance(d time.Duration) Turn {
	t := Do("advance "+d.String(), func(ctx context.Context, r *durable.Runner, _ Env) error {
		_, err := r.Sweep(ctx, 0)
		return err
	})
	t.advance = d
	return t
}

// Do is a turn of the test's own, named name: fn acts on the machine
// MachineID through r — over HTTP, through a handler of the charter's
// service. It must give the machine one input at most: the turn counts as
// held by the store once the machine's revision moved after it began.
func Do(name string, fn func(ctx context.Context, r *durable.Runner, env Env) error) Turn {
	return Turn{name: name, do: fn}
}

// progressFile is the file in Env.Dir where the conversation notes the
// turn it begins (with the machine's revision then) and each it ends.
const progressFile = "durabletest.progress"

// progress is what a conversation's progress file says.
type progress struct {
	begun int   // the last turn begun (-1: none)
	rev   int64 // the machine's revision when it began
	done  bool  // whether it ended
}

// readProgress reads env's progress file; a line cut short by a crash is
// ignored.
func readProgress(env Env) (progress, error) {
	p := progress{begun: -1}
	f, err := os.Open(filepath.Join(env.Dir, progressFile))
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var i int
		var rev int64
		switch {
		case parseLine(sc.Text(), "begin %d %d\n", &i, &rev):
			p = progress{begun: i, rev: rev}
		case parseLine(sc.Text(), "done %d\n", &i) && i == p.begun:
			p.done = true
		}
	}
	return p, sc.Err()
}

// parseLine parses line (without its newline) by format (with it).
func parseLine(line, format string, args ...any) bool {
	n, err := fmt.Sscanf(line+"\n", format, args...)
	return err == nil && n == len(args)
}

// note appends a line to env's progress file and syncs it.
func note(env Env, format string, args ...any) error {
	f, err := os.OpenFile(filepath.Join(env.Dir, progressFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, format, args...)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// converse runs the scenario's conversation on r, with the scenario's
// clock clk: the machine created if the store does not hold it, each turn
// the store does not hold yet sent once the one before ended, effects in
// doubt settled after each. A restart first continues a run cut short
// (Runner.Recover), then starts from the turn it was killed in when the
// store does not hold it, else from the next; time is moved to where the
// killed process had it, and a sweep killed before its save runs once the
// dead sweeper's claim lapsed (durable.DefaultLease later).
func converse(ctx context.Context, r *durable.Runner, sc Scenario, env Env, clk *testkit.Clock, restart bool) error {
	turns := sc.turns()
	from := 0
	if restart {
		if _, err := r.Recover(ctx); err != nil {
			return err
		}
		p, err := readProgress(env)
		if err != nil {
			return err
		}
		from = p.begun + 1
		if p.begun >= 0 && !p.done {
			_, rev, err := r.Load(ctx, MachineID)
			if err != nil {
				return err
			}
			if rev == p.rev {
				from = p.begun
				if turns[from].advance > 0 {
					clk.Advance(durable.DefaultLease)
				}
			}
		}
		for _, t := range turns[:from] {
			clk.Advance(t.advance)
		}
	}
	if _, _, err := r.Load(ctx, MachineID); errors.Is(err, store.ErrNotFound) {
		if _, err := r.Create(ctx, MachineID, sc.Root, nil); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := settle(ctx, r, sc, env); err != nil {
		return err
	}
	for i := from; i < len(turns); i++ {
		_, rev, err := r.Load(ctx, MachineID)
		if err != nil {
			return err
		}
		if err := note(env, "begin %d %d\n", i, rev); err != nil {
			return err
		}
		clk.Advance(turns[i].advance)
		if err := turns[i].do(ctx, r, env); err != nil {
			return fmt.Errorf("turn %d (%s): %w", i+1, turns[i], err)
		}
		if err := settle(ctx, r, sc, env); err != nil {
			return err
		}
		if err := note(env, "done %d\n", i); err != nil {
			return err
		}
	}
	return nil
}

// settle decides each effect of the machine in doubt with sc.Decide, and
// runs the machine on with the decision, until none is.
func settle(ctx context.Context, r *durable.Runner, sc Scenario, env Env) error {
	for {
		m, _, err := r.Load(ctx, MachineID)
		if err != nil {
			return err
		}
		var call *instance.SuspendedCall
		var d instance.InDoubt
		for _, c := range m.Pending() {
			if dd, ok := instance.InDoubtOf(c.Metadata); ok {
				call, d = &c, dd
				break
			}
		}
		if call == nil {
			return nil
		}
		if sc.Decide == nil {
			return fmt.Errorf("%w: effect %s (%s)", ErrInDoubt, d.Effect, call.Reason)
		}
		dec, err := sc.Decide(env, d)
		if err != nil {
			return fmt.Errorf("decide effect %s: %w", d.Effect, err)
		}
		run, err := r.Resume(ctx, machine.ResumeInput{SuspendID: call.SuspendID, Payload: dec, By: "durabletest"})
		if err != nil {
			return err
		}
		if err := drain(run.Steps()); err != nil {
			return err
		}
	}
}

// drain runs steps to their end, returning the first error.
func drain(steps func(func(machine.Step, error) bool)) error {
	for _, err := range steps {
		if err != nil {
			return err
		}
	}
	return nil
}
