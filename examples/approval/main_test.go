package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

const wantOutput = `customer: Hi, the blender from order A-1042 arrived broken. Can I get my $89.90 back?
[step: suspend, done: true]
(held until resumed) assistant: I'm sorry about the blender. I'll ask a manager to approve the refund.
(held until resumed) assistant calls request_refund {"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}

pending tool call
  suspend ID: <ID>
  instance:   <INSTANCE>
  tool:       request_refund
  input:      {"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}
  metadata:   {"order_id":"A-1042","amount":89.9}
  payload:    {"type":"object","properties":{"approved":{"type":"boolean","description":"true to issue the refund, false to decline it"},"manager":{"type":"string","description":"who decided"}},"required":["approved","manager"],"additionalProperties":false}
  reason:     refund of $89.90 for order A-1042 needs a manager's approval
  suspended:  <TIME>
  deadline:   <TIME> (48h0m0s after suspension); then the call fails
  the manager sees: order A-1042, $89.90

manager sends: {"approved":"yes"}
refused, 1 call still pending: payload: approved: expected boolean, got string

manager decides: {Approved:true Manager:dana@example.com}
[step: end_turn, done: true]
suspension <ID> resumed (tool request_refund)
assistant: I'm sorry about the blender. I'll ask a manager to approve the refund.
assistant calls request_refund {"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}
tool result: refund of $89.90 for order A-1042 issued, approved by dana@example.com
assistant: Update on your refund: refund of $89.90 for order A-1042 issued, approved by dana@example.com.

ledger: refunded [A-1042]
`

var (
	suspendIDLine = regexp.MustCompile(`suspend ID: (\S+)`)
	instanceLine  = regexp.MustCompile(`instance:   (\S+)`)
	timestamp     = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, refund.ScriptedModel()))
	got := out.String()

	// The suspend ID is random and the deadline depends on the clock.
	id := suspendIDLine.FindStringSubmatch(got)
	require.NotNil(t, id, "no suspend ID in output:\n%s", got)
	require.Regexp(t, `^[A-Z2-7]{26}$`, id[1], "suspend IDs are random base32")
	got = strings.ReplaceAll(got, id[1], "<ID>")
	inst := instanceLine.FindStringSubmatch(got)
	require.NotNil(t, inst, "no instance ID in output:\n%s", got)
	got = strings.ReplaceAll(got, inst[1], "<INSTANCE>")
	got = timestamp.ReplaceAllString(got, "<TIME>")
	if diff := cmp.Diff(wantOutput, got); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// park starts a machine of the refund charter and runs the customer
// request up to the suspension.
func park(t *testing.T, state any) (*machine.Machine, instance.SuspendedCall) {
	t.Helper()
	charter, err := refund.NewCharter(refund.ScriptedModel())
	require.NoError(t, err)
	m, err := charter.NewMachine(refund.NodeName, state)
	require.NoError(t, err)
	var last machine.Step
	for step, err := range m.Run(context.Background(), machine.UserText(refund.CustomerRequest)) {
		require.NoError(t, err)
		last = step
	}
	require.Equal(t, machine.Suspend, last.Reason)
	require.True(t, last.Done)
	require.Len(t, last.Suspensions, 1)
	call := last.Suspensions[0]
	require.Equal(t, instance.KindTool, call.Kind)
	require.Equal(t, "request_refund", call.Name)
	meta, err := instance.Decode[refund.RefundMeta](call.Metadata)
	require.NoError(t, err)
	require.Equal(t, refund.RefundMeta{OrderID: "A-1042", Amount: 89.90}, meta)
	require.Equal(t, refund.ApprovalTimeout, call.Deadline.Sub(call.SuspendedAt))
	require.False(t, call.OnTimeout.Resume)
	return m, call
}

// finish runs m with inputs and returns the steps.
func finish(t *testing.T, m *machine.Machine, inputs ...machine.Input) []machine.Step {
	t.Helper()
	var steps []machine.Step
	for step, err := range m.Run(context.Background(), inputs...) {
		require.NoError(t, err)
		steps = append(steps, step)
	}
	return steps
}

func lastText(msgs []message.Message) string {
	return msgs[len(msgs)-1].Text()
}

func TestDeclined(t *testing.T) {
	m, call := park(t, nil)
	steps := finish(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: refund.Approval{Approved: false, Manager: "sam"}})
	require.Len(t, steps, 1)
	require.Equal(t, "Update on your refund: sam declined the refund for order A-1042.", lastText(m.History()))
	require.Equal(t, refund.Ledger{}, m.Root().State)
	require.Empty(t, m.Pending())
}

func TestTimeoutFailsTheCall(t *testing.T) {
	m, call := park(t, nil)
	events, err := m.Expire(call.Deadline)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, instance.EventExpired, events[0].Type)

	steps := finish(t, m)
	require.NotEmpty(t, steps)
	h := m.History()
	results := h[len(h)-2]
	require.Equal(t, message.Tool, results.Role)
	require.True(t, results.Parts[0].IsError, "an expired approval is an error result")
	require.Contains(t, lastText(h), "Sorry, I couldn't get your refund approved: suspension "+call.SuspendID+" expired")
	require.Equal(t, refund.Ledger{}, m.Root().State)

	// A decision arriving after the deadline is refused.
	for _, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: call.SuspendID, Payload: refund.Approval{Approved: true}}) {
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
	}
}

func TestResumeErrorsLeaveTheMachineAlone(t *testing.T) {
	m, call := park(t, nil)
	before := m.History()
	for _, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: "no-such-id", Payload: refund.Approval{}}) {
		require.ErrorIs(t, err, instance.ErrUnknownSuspendID)
	}
	require.Equal(t, before, m.History())
	require.Len(t, m.Pending(), 1)

	finish(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: refund.Approval{Approved: true, Manager: "dana"}})
	require.Equal(t, refund.Ledger{Refunded: []string{"A-1042"}}, m.Root().State)
	for _, err := range m.Run(context.Background(), machine.ResumeInput{SuspendID: call.SuspendID, Payload: refund.Approval{Approved: true}}) {
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)
	}
}

func TestAlreadyRefundedDoesNotSuspend(t *testing.T) {
	charter, err := refund.NewCharter(refund.ScriptedModel())
	require.NoError(t, err)
	m, err := charter.NewMachine(refund.NodeName, refund.Ledger{Refunded: []string{"A-1042"}})
	require.NoError(t, err)
	steps := finish(t, m, machine.UserText(refund.CustomerRequest))
	require.Equal(t, machine.EndTurn, steps[len(steps)-1].Reason)
	require.Empty(t, m.Pending())
	require.Equal(t, "Sorry, I couldn't get your refund approved: order A-1042 was already refunded. I've passed it on to a human colleague.",
		lastText(m.History()))
}
