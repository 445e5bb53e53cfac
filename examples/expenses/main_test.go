package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/examples/expenses/ledger"
)

// TestExpenses runs the example's scenario: escalation and back with the
// ledger intact, a withdrawal by command, a malformed approval refused
// with a short message, an approval over signed HTTP, an expiry by the
// sweeper, and the event log showing every change of the ledger.
func TestExpenses(t *testing.T) {
	rep, err := run(context.Background(), io.Discard, filepath.Join(t.TempDir(), "expenses.db"))
	require.NoError(t, err)

	require.Equal(t, http.StatusBadRequest, rep.Status)
	require.Equal(t, "payload_decode", rep.Refused.Code)
	require.Contains(t, rep.Refused.Error, "approved")
	require.Less(t, len(rep.Refused.Error), 120, "a message a person reads is short: %q", rep.Refused.Error)

	require.Equal(t, []string{
		"Done: expense e1 approved.",
		"Back with you: expense e2 withdrawn.",
		"Done: expense e3 expired.",
	}, rep.Answers)
	require.Equal(t, []string{ledger.Assistant, ledger.Assistant, ledger.Assistant}, rep.Nodes, "back from the senior node")

	type row struct{ ID, Status, DecidedBy string }
	var rows []row
	for _, e := range rep.Ledger.Expenses {
		rows = append(rows, row{e.ID, e.Status, e.DecidedBy})
	}
	require.Equal(t, []row{{"e1", ledger.Approved, "bob"}, {"e2", ledger.Withdrawn, ""}, {"e3", ledger.Expired, ""}}, rows)

	// The event log shows every change of the ledger: each expense filed,
	// sent for approval, and decided — the decisions of a resume handler
	// included.
	var statuses [][]string
	for _, l := range rep.Changes {
		var s []string
		for _, e := range l.Expenses {
			s = append(s, e.Status)
		}
		statuses = append(statuses, s)
	}
	require.Equal(t, [][]string{
		{ledger.Filed},
		{ledger.Pending},
		{ledger.Approved},
		{ledger.Approved, ledger.Filed},
		{ledger.Approved, ledger.Pending},
		{ledger.Approved, ledger.Withdrawn},
		{ledger.Approved, ledger.Withdrawn, ledger.Filed},
		{ledger.Approved, ledger.Withdrawn, ledger.Pending},
		{ledger.Approved, ledger.Withdrawn, ledger.Expired},
	}, statuses)
}
