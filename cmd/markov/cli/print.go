package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/markov-agents/markov/steptext"
	"github.com/markov-agents/markov/store"
)

// PrintSuspensions prints index entries as a table.
func PrintSuspensions(w io.Writer, list []store.Suspension, now time.Time) {
	tw := newTable(w)
	fmt.Fprintln(tw, "SUSPEND ID\tMACHINE\tCALL\tREASON\tDEADLINE")
	for _, s := range list {
		call := s.Kind
		if s.Name != "" {
			call += " " + s.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.MachineID, call, steptext.OneLine(s.Reason, 80), deadlineText(s.Deadline, now))
	}
	_ = tw.Flush()
}

// deadlineText formats a deadline with how far it is from now.
func deadlineText(d, now time.Time) string {
	if d.IsZero() {
		return "none"
	}
	left := d.Sub(now).Round(time.Second)
	if left <= 0 {
		return fmt.Sprintf("%s (passed %s ago)", formatTime(d), -left)
	}
	return fmt.Sprintf("%s (in %s)", formatTime(d), left)
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }
