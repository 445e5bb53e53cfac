package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres"
)

// payPolicy governs the charter's "pay" tool: two of bo, cy and dee.
var payPolicy = instance.Policy{Subjects: []string{"bo", "cy", "dee"}, Quorum: 2}

// parkPayment creates machine id and runs it, on a message of mode
// ("govern": the pay tool; "govern-edit": pay-editable), until the tool
// waits for two approvers, and returns the call.
func parkPayment(t *testing.T, f *fleet.Fleet, id, mode string) instance.SuspendedCall {
	t.Helper()
	ctx := context.Background()
	_, err := f.Runner().Create(ctx, id, "desk", nil)
	require.NoError(t, err)
	_, err = testkit.Collect(f.Runner().Run(ctx, id, machine.UserText(mode)))
	require.NoError(t, err)
	m, _, err := f.Runner().Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, m.Pending(), 1)
	return m.Pending()[0]
}

func approval(call instance.SuspendedCall, by string) machine.ResumeInput {
	return machine.ResumeInput{SuspendID: call.SuspendID, Payload: "approved by " + by, By: by, Digest: call.Digest}
}

// payResults returns machine id's tool results for call once it has
// ended its turn.
func payResults(t *testing.T, f *fleet.Fleet, id string, call instance.SuspendedCall) []string {
	t.Helper()
	ctx := context.Background()
	var m *machine.Machine
	require.Eventually(t, func() bool {
		var err error
		m, _, err = f.Runner().Load(ctx, id)
		require.NoError(t, err)
		h := m.History()
		return h[len(h)-1].Text() == "all done"
	}, 30*time.Second, 20*time.Millisecond)
	var results []string
	for _, p := range testkit.SuspendParts(m.History(), call.SuspendID) {
		if p.Kind == message.KindToolResult {
			results = append(results, p.Text)
		}
	}
	return results
}

// Three approvers of a two-of-three payment decide at the same moment on
// a fleet: the first two are accepted — neither has to retry — and the
// third is told the decisions accepted settle it; a second decision of
// one approver is already_decided. The payment resolves once.
func TestQuorumDecisionsAccepted(t *testing.T) {
	f, _ := startFleet(t)
	ctx := context.Background()
	call := parkPayment(t, f, "pay-q", "govern")
	_, err := f.Resume(ctx, approval(call, "eve"))
	require.ErrorIs(t, err, instance.ErrForbidden)

	by := []string{"bo", "cy", "dee"}
	errs := testkit.Race(3, func(i int) error {
		_, err := f.Resume(ctx, approval(call, by[i]))
		return err
	})
	require.Equal(t, 2, acceptedOf(t, errs))
	results := payResults(t, f, "pay-q", call)
	require.Len(t, results, 1, "resolved once")
}

// A payment that has one decision accepted refuses a second of the same
// approver and a cancel by a person its policy does not name, queues the
// service's cancel, and refuses any decision after it.
func TestQuorumSameApproverTwice(t *testing.T) {
	f, _, _, _ := openTestFleet(t) // not started: decisions stay in the inbox
	ctx := context.Background()
	call := parkPayment(t, f, "pay-2", "govern")
	_, err := f.Resume(ctx, approval(call, "bo"))
	require.NoError(t, err)
	_, err = f.Resume(ctx, approval(call, "bo"))
	require.ErrorIs(t, err, instance.ErrAlreadyDecided)
	_, err = f.Cancel(ctx, machine.CancelInput{SuspendID: call.SuspendID, By: "eve"})
	require.ErrorIs(t, err, instance.ErrForbidden, "a person the policy does not name")
	_, err = f.Cancel(ctx, machine.CancelInput{SuspendID: call.SuspendID})
	require.NoError(t, err, "a cancel queues behind a decision that does not settle the call")
	_, err = f.Resume(ctx, approval(call, "cy"))
	require.ErrorIs(t, err, instance.ErrAlreadyResolved, "behind a cancel")
}

// decider is a child process that decides, as by, the payment
// FLEET_SUSPEND_ID of digest FLEET_DIGEST once told to go, and says
// "accepted" or the error.
func decider(by string) int {
	ctx := context.Background()
	f, s, err := openFleet(ctx, os.Getenv("FLEET_URL"), os.Getenv("FLEET_SCHEMA"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "decider:", err)
		return 2
	}
	defer s.Close()
	if err := testkit.AwaitGo(); err != nil {
		return 2
	}
	_, err = f.Resume(ctx, machine.ResumeInput{SuspendID: os.Getenv("FLEET_SUSPEND_ID"), Payload: "approved by " + by, By: by, Digest: os.Getenv("FLEET_DIGEST")})
	if err != nil {
		fmt.Println("error:", err)
		return 0
	}
	fmt.Println("accepted")
	return 0
}

// Two approvers in two OS processes decide a two-of-three payment at the
// same moment: both are accepted (no 409 to retry), each decision is
// recorded once, and the payment resolves once.
func TestQuorumRaceTwoProcesses(t *testing.T) {
	f, s, url, schema := openTestFleet(t)
	ctx := context.Background()
	call := parkPayment(t, f, "pay-r", "govern")
	child := func(by string) *exec.Cmd {
		return testkit.ChildCommand("FLEET_WORKER=decide:"+by, "FLEET_URL="+url, "FLEET_SCHEMA="+schema,
			"FLEET_SUSPEND_ID="+call.SuspendID, "FLEET_DIGEST="+call.Digest)
	}
	lines, err := testkit.RaceChildren(child("bo"), child("cy"))
	require.NoError(t, err)
	require.Equal(t, []string{"accepted", "accepted"}, lines)

	require.NoError(t, f.Start(ctx))
	t.Cleanup(func() { f.Stop(ctx) })
	require.Len(t, payResults(t, f, "pay-r", call), 1, "resolved once")
	checkAudit(t, s)
}

// checkAudit checks that the audit log of s verifies and records bo's
// and cy's decisions once each: one recorded, one approving.
func checkAudit(t *testing.T, s *postgres.Store) {
	t.Helper()
	outcomes := map[string]string{}
	_, err := store.VerifyAudit(context.Background(), s, nil, func(e store.AuditEntry) error {
		var rec durable.AuditRecord
		if err := json.Unmarshal(e.Entry, &rec); err != nil {
			return err
		}
		require.Empty(t, outcomes[rec.By], "%s recorded once", rec.By)
		outcomes[rec.By] = rec.Outcome
		return nil
	})
	require.NoError(t, err)
	require.Len(t, outcomes, 2)
	require.ElementsMatch(t, []string{machine.DecisionRecorded, machine.DecisionApproved}, []string{outcomes["bo"], outcomes["cy"]})
}

// escalatePolicy governs the charter's "escalate" tool: bo decides; at
// the deadline cy does, for 400 ms more, and then the call is denied.
var escalatePolicy = instance.Policy{Subjects: []string{"bo"},
	Escalation: &instance.Escalation{Policy: instance.Policy{Subjects: []string{"cy"}}, Timeout: 400 * time.Millisecond}}

// On a fleet the deadline job escalates the call, then waits for the
// escalation's deadline and denies it: the model hears the refusal.
func TestEscalationOnFleet(t *testing.T) {
	f, s := startFleet(t)
	ctx := context.Background()
	_, err := f.Runner().Create(ctx, "esc", "desk", nil)
	require.NoError(t, err)
	steps, err := testkit.Collect(f.Runner().Run(ctx, "esc", machine.UserText("escalate")))
	require.NoError(t, err)
	call := steps[len(steps)-1].Suspensions[0]
	results := payResults(t, f, "esc", call)
	require.Equal(t, []string{"nobody answered"}, results)
	require.Equal(t, []string{machine.DecisionEscalated, machine.DecisionDenied}, auditOutcomes(t, s))
}

// auditOutcomes verifies the audit log of s and returns the outcome of
// each entry, oldest first.
func auditOutcomes(t *testing.T, s *postgres.Store) []string {
	t.Helper()
	var outcomes []string
	_, err := store.VerifyAudit(context.Background(), s, nil, func(e store.AuditEntry) error {
		var rec durable.AuditRecord
		if err := json.Unmarshal(e.Entry, &rec); err != nil {
			return err
		}
		outcomes = append(outcomes, rec.Outcome)
		return nil
	})
	require.NoError(t, err)
	return outcomes
}

// remindPolicy governs the charter's "remind" tool: bo decides, and is
// reminded every second until the deadline (8 s).
var remindPolicy = instance.Policy{Subjects: []string{"bo"}, Remind: time.Second}

// On a fleet the deadline job reminds bo while the call waits — at most
// once per interval, each reminder an event on the machine's log and an
// audit entry — and denies the call at its deadline. River moves a
// scheduled job to run on its scheduler's tick (every 5 s), so the job
// runs at least once before the 8 s deadline, and fewer reminders than
// seven come.
func TestRemindersOnFleet(t *testing.T) {
	f, s := startFleet(t)
	ctx := context.Background()
	_, err := f.Runner().Create(ctx, "rem", "desk", nil)
	require.NoError(t, err)
	steps, err := testkit.Collect(f.Runner().Run(ctx, "rem", machine.UserText("remind")))
	require.NoError(t, err)
	call := steps[len(steps)-1].Suspensions[0]
	require.Equal(t, []string{"nobody answered"}, payResults(t, f, "rem", call))
	outcomes := auditOutcomes(t, s)
	reminders := len(outcomes) - 1
	require.GreaterOrEqual(t, reminders, 1, "reminded before the deadline: %v", outcomes)
	require.LessOrEqual(t, reminders, 7, "at most once per interval, none at the deadline: %v", outcomes)
	want := append(slices.Repeat([]string{machine.DecisionReminded}, reminders), machine.DecisionDenied)
	require.Equal(t, want, outcomes)
	var events []machine.EventKind
	for e, err := range f.Runner().Watch(ctx, "rem", 0) {
		require.NoError(t, err)
		if e.Kind == machine.EventReminded || e.Kind == machine.EventExpired {
			events = append(events, e.Kind)
		}
		if e.Kind == machine.EventExpired {
			break
		}
	}
	require.Equal(t, append(slices.Repeat([]machine.EventKind{machine.EventReminded}, reminders), machine.EventExpired), events)
}

// acceptedOf counts the resumes of errs that were accepted; every other
// was refused as already resolved.
func acceptedOf(t *testing.T, errs []error) int {
	t.Helper()
	accepted := 0
	for _, err := range errs {
		if err == nil {
			accepted++
			continue
		}
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
	}
	return accepted
}

// A decision accepted after an edit names the digest the edit changes:
// it is refused as stale at once, not accepted and dropped later.
func TestDecisionAfterAcceptedEdit(t *testing.T) {
	f, _, _, _ := openTestFleet(t) // not started: decisions stay in the inbox
	ctx := context.Background()
	call := parkEditable(t, f)
	edit := approval(call, "bo")
	edit.Edit = askIn{TimeoutMS: 5}
	_, err := f.Resume(ctx, edit)
	require.NoError(t, err)
	_, err = f.Resume(ctx, approval(call, "cy"))
	require.ErrorIs(t, err, instance.ErrStaleDecision)
}

// parkEditable creates machine "edit" and runs it until its pay tool, on
// a call whose policy allows edits, waits for two approvers.
func parkEditable(t *testing.T, f *fleet.Fleet) instance.SuspendedCall {
	t.Helper()
	return parkPayment(t, f, "edit", "govern-edit")
}
