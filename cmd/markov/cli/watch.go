package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/steptext"
)

// Watch prints a machine's events as they happen, from any process: its
// event log after --after, then live — text as the model streams it, tool
// calls, suspensions — until interrupted (or, with --until-done, the end
// of a run).
func Watch(ctx context.Context, c *CLI, args []string) error {
	fs := c.FlagSet("watch")
	after := fs.Int64("after", 0, "start after this sequence `number` (0: the whole log)")
	untilDone := fs.Bool("until-done", false, "exit after the last step of a run")
	out := OutputFlag(fs)
	pos, err := c.ParseArgs(fs, "watch", args, 1, 1, "one machine ID")
	if err != nil {
		return err
	}
	if *after < 0 {
		return Usagef("watch", "--after %d is negative", *after)
	}
	err = c.watch(ctx, pos[0], *after, *out, *untilDone)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return nil // interrupted: the usual way to stop watching
	}
	return err
}

// watch opens the database and prints machine id's events after seq.
func (c *CLI) watch(ctx context.Context, id string, after int64, out Format, untilDone bool) error {
	db, err := c.OpenReadOnly(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	return c.writeWatch(db.Runner.Watch(ctx, id, after), out, untilDone)
}

// writeWatch prints the events of a watch: as text (steptext.EventWriter;
// echoes skipped) or as one durable.Event JSON object a line.
func (c *CLI) writeWatch(events func(func(durable.Event, error) bool), out Format, untilDone bool) error {
	w := c.Out()
	ew := steptext.NewEventWriter(w)
	enc := json.NewEncoder(w)
	for e, err := range events {
		if err != nil {
			ew.EndLine()
			return err
		}
		switch {
		case out == FormatJSON:
			err = enc.Encode(e)
		case !e.Echo && !(e.Text == "" && (e.Kind == machine.EventTextDelta || e.Kind == machine.EventThinkingDelta)):
			err = ew.Write(e.Event)
		}
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if untilDone && e.Kind == machine.EventStep && e.Step.Done {
			return ew.EndLine()
		}
	}
	return ew.EndLine()
}
