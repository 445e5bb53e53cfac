package cli

// This file is the commands of the resume conditions: signal (resume the
// suspensions waiting for a named event) and suspend (park a machine on
// behalf of the caller).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
)

// Signal resumes every suspension waiting for a named event, each with
// the payload, and prints how many it woke.
func Signal(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("signal")
	text := fs.Bool("text", false, "pass the payload as plain text rather than JSON")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "signal", args, 1, 2, "an event name and an optional payload")
	if err != nil {
		return err
	}
	event := pos[0]
	if err := instance.CheckEvent(event); err != nil {
		return Usagef("signal", "%v", err)
	}
	var payload any
	if len(pos) == 2 {
		if payload, err = parsePayload(pos[1], *text); err != nil {
			return Usagef("signal", "%v", err)
		}
	}
	db, err := c.Open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	woken, err := db.Runner.Signal(ctx, event, payload)
	if *out == FormatJSON && err == nil {
		return c.WriteJSON(resumehttp.SignalResult{Event: event, Woken: woken})
	}
	if err != nil {
		return fmt.Errorf("signal %s woke %d suspension(s), then: %w", event, woken, err)
	}
	fmt.Fprintf(c.Out(), "signal %s woke %d suspension(s)\n", event, woken)
	return nil
}

// suspendFlags are the flags of suspend.
type suspendFlags struct {
	mode, event, onTimeout, input string
	timeout                       time.Duration
	noWait                        bool
}

// options turns the flags into the options of durable.Runner.Suspend.
func (f *suspendFlags) options() ([]durable.SuspendOption, error) {
	mode, err := durable.ParseSuspendMode(f.mode)
	if err != nil {
		return nil, err
	}
	var input any
	if f.input != "" {
		if input, err = parsePayload(f.input, false); err != nil {
			return nil, err
		}
	}
	cond, err := instance.Conditions{Event: f.event, Timeout: f.timeout, OnTimeout: instance.TimeoutKind(f.onTimeout)}.Options(input)
	if err != nil {
		return nil, err
	}
	opts := []durable.SuspendOption{durable.WithMode(mode), durable.WithConditions(cond...)}
	if f.noWait {
		opts = append(opts, durable.NoWait())
	}
	return opts, nil
}

// Suspend parks a stored machine on behalf of the caller: at once if no
// run holds it, otherwise at the point its mode names, by the run that
// does.
func Suspend(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("suspend")
	var f suspendFlags
	fs.StringVar(&f.mode, "mode", string(durable.FinishStep), "when a running machine suspends: finish_step, interrupt_immediate or wait_for_completion")
	fs.StringVar(&f.event, "event", "", "also resume on this named `event` ('markov signal NAME')")
	fs.DurationVar(&f.timeout, "timeout", 0, "time out after this `duration`")
	fs.StringVar(&f.onTimeout, "on-timeout", "", "what the timeout does: fail (default), resume_with_input or resume_with_summary")
	fs.StringVar(&f.input, "input", "", "the `JSON` payload of --on-timeout resume_with_input")
	fs.BoolVar(&f.noWait, "no-wait", false, "do not wait for a run that holds the machine to apply the suspension")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "suspend", args, 1, -1, "a machine ID and an optional reason")
	if err != nil {
		return err
	}
	opts, err := f.options()
	if err != nil {
		return Usagef("suspend", "%v", err)
	}
	id, reason := pos[0], strings.Join(pos[1:], " ")
	if reason == "" {
		reason = "suspended from the command line"
	}
	db, err := c.Open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	sus, err := db.Runner.Suspend(ctx, id, reason, opts...)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("no machine %s in %s (list them with '%s inspect'): %w", id, db.Name, c.name(), err)
	case errors.Is(err, machine.ErrNoPrimary):
		return fmt.Errorf("machine %s has no primary leaf to suspend; nothing changed: %w", id, err)
	case err != nil:
		return err
	}
	if *out == FormatJSON {
		return c.WriteJSON(resumehttp.SuspendResultOf(sus))
	}
	w := c.Out()
	if !sus.Applied {
		fmt.Fprintf(w, "suspend of machine %s requested (%s): the run in progress applies it; handle %s\n", id, sus.Mode, sus.ID)
		return nil
	}
	fmt.Fprintf(w, "suspended machine %s at %s: handle %s\n%s\nresume with '%s resume %s <payload>'\n",
		id, sus.SuspendedAt.Format(time.RFC3339), sus.ID, sus.Summary, c.name(), sus.ID)
	return nil
}
