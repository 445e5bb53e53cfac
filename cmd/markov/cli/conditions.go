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
	"github.com/markov-agents/markov/store"
)

// signalEntry is the JSON output of signal.
type signalEntry struct {
	Event string `json:"event"`
	Woken int    `json:"woken"`
}

// Signal resumes every suspension waiting for a named event, each with
// the payload, and prints how many it woke.
func Signal(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("signal")
	text := fs.Bool("text", false, "pass the payload as plain text rather than JSON")
	out := OutputFlag(fs)
	pos, err := c.Parse(fs, "signal", args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return Usagef("signal", "want an event name and an optional payload, got %d arguments", len(pos))
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
		return c.WriteJSON(signalEntry{Event: event, Woken: woken})
	}
	if err != nil {
		return fmt.Errorf("signal %s woke %d suspension(s), then: %w", event, woken, err)
	}
	fmt.Fprintf(c.Out(), "signal %s woke %d suspension(s)\n", event, woken)
	return nil
}

// suspendEntry is the JSON output of suspend (the ACP draft RFC's
// SessionSuspendResponse, in snake case).
type suspendEntry struct {
	Handle      string    `json:"handle"`
	MachineID   string    `json:"machine_id"`
	InstanceID  string    `json:"instance_id,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Mode        string    `json:"mode"`
	Applied     bool      `json:"applied"`
	RequestedAt time.Time `json:"requested_at"`
	SuspendedAt time.Time `json:"suspended_at,omitzero"`
	Event       string    `json:"on_event,omitempty"`
	Deadline    time.Time `json:"deadline,omitzero"`
	OnTimeout   string    `json:"on_timeout,omitempty"`
	Summary     string    `json:"summary,omitempty"`
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
	pos, err := c.Parse(fs, "suspend", args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return Usagef("suspend", "want a machine ID and an optional reason")
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
		return c.WriteJSON(suspendEntry{Handle: sus.ID, MachineID: sus.MachineID, InstanceID: sus.InstanceID, Reason: sus.Reason,
			Mode: string(sus.Mode), Applied: sus.Applied, RequestedAt: sus.RequestedAt, SuspendedAt: sus.SuspendedAt,
			Event: sus.Conditions.Event, Deadline: sus.Conditions.Deadline, OnTimeout: string(sus.Conditions.OnTimeout), Summary: sus.Summary})
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
