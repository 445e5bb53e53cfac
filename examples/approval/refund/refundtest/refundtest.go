// Package refundtest runs the refund approval flow against any model, for
// tests of model adapters: the customer's request runs until the refund
// tool suspends, the machine is serialized and restored with a fresh
// charter (a second process), and the manager's decision resumes it.
package refundtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/serialize"
)

// Case is one decision and what it must lead to.
type Case struct {
	Name       string
	Decision   refund.Approval
	WantResult string // the tool result the model must receive
	WantLedger refund.Ledger
}

// Cases are an approval and a refusal.
var Cases = []Case{
	{"approved", refund.Approval{Approved: true, Manager: "dana@example.com"},
		"refund of $89.90 for order A-1042 issued, approved by dana@example.com",
		refund.Ledger{Refunded: []string{"A-1042"}}},
	{"declined", refund.Approval{Approved: false, Manager: "sam@example.com"},
		"sam@example.com declined the refund for order A-1042",
		refund.Ledger{}},
}

// Expect is what the model's scripted replies say.
type Expect struct {
	// ToolUseID is the ID the model gives its request_refund call.
	ToolUseID string
	// HeldText is the text of the reply that calls the tool.
	HeldText string
	// FinalText is the final answer after the resume.
	FinalText string
}

// RunCases plays the flow for each of Cases in a subtest. setup is called
// once per case with the tool result the model must receive and returns
// the factory of the case's models (called once per "process"); requests
// that reach the model are the caller's to check.
func RunCases(t *testing.T, want Expect, setup func(t *testing.T, wantResult string) func() llm.Model) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			run(t, setup(t, c.WantResult), c, want)
		})
	}
}

// run plays the flow for c with models from newModel.
func run(t *testing.T, newModel func() llm.Model, c Case, want Expect) {
	t.Helper()
	ctx := context.Background()

	// Process 1: run the customer's request until the tool suspends.
	m, err := refund.NewMachine(newModel())
	require.NoError(t, err)
	var last machine.Step
	for step, err := range m.Run(ctx, machine.UserText(refund.CustomerRequest)) {
		require.NoError(t, err)
		last = step
	}
	require.Equal(t, machine.Suspend, last.Reason)
	require.True(t, last.NeedsResume())
	require.Len(t, last.Suspensions, 1)
	call := last.Suspensions[0]
	require.Equal(t, instance.KindTool, call.Kind)
	require.Equal(t, refund.ToolName, call.Name)
	require.Equal(t, want.ToolUseID, call.ToolUseID)
	require.JSONEq(t, `{"order_id":"A-1042","amount":89.9,"reason":"arrived broken"}`, string(call.Input))
	meta, err := instance.Decode[refund.RefundMeta](call.Metadata)
	require.NoError(t, err)
	require.Equal(t, refund.RefundMeta{OrderID: "A-1042", Amount: 89.9}, meta)
	require.Len(t, last.Held, 1)
	require.Equal(t, want.HeldText, last.Held[0].Text())

	data, err := serialize.Marshal(m)
	require.NoError(t, err)

	// Process 2: a fresh charter and model restore the machine and resume
	// it with the manager's decision.
	charter2, err := refund.NewCharter(newModel())
	require.NoError(t, err)
	m2, err := serialize.Unmarshal(charter2, data)
	require.NoError(t, err)
	require.Len(t, m2.Pending(), 1)
	var steps []machine.Step
	for step, err := range m2.Run(ctx, machine.ResumeInput{SuspendID: call.SuspendID, Payload: c.Decision}) {
		require.NoError(t, err)
		steps = append(steps, step)
	}
	require.NotEmpty(t, steps)
	final := steps[len(steps)-1]
	require.Equal(t, machine.EndTurn, final.Reason)
	require.True(t, final.Done)
	require.False(t, final.NeedsResume())
	h := m2.History()
	require.Equal(t, want.FinalText, h[len(h)-1].Text())
	require.Equal(t, c.WantLedger, m2.Root().State)
	require.Empty(t, m2.Pending())
}
