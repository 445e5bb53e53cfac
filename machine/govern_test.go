package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/serialize"
)

// governed returns a machine suspended on one "ask" call under policy p,
// asked for by requester (the identity of the run), its call, and the
// model, whose one reply left answers after the resume.
func governed(t *testing.T, p instance.Policy, requester string) (*machine.Machine, instance.SuspendedCall, *scripted.Model) {
	t.Helper()
	model := scripted.New(scripted.Tool("ask", askIn{"refund"}), scripted.Text("done"))
	m := newMachine(t, charter(t, model, typedDesk(t, instance.WithPolicy(p))), "desk")
	ctx := instance.WithIdentity(context.Background(), instance.Identity{Subject: requester})
	_, err := collect(m.Run(ctx, machine.UserText("refund order 42")))
	require.NoError(t, err)
	pending := m.Pending()
	require.Len(t, pending, 1)
	return m, pending[0], model
}

// refused runs in on m, which must fail with want and leave m exactly
// as it was.
func refused(t *testing.T, m *machine.Machine, in machine.ResumeInput, want error) {
	t.Helper()
	before, err := serialize.Marshal(m)
	require.NoError(t, err)
	_, err = collect(m.Run(context.Background(), in))
	require.ErrorIs(t, err, want)
	after, err := serialize.Marshal(m)
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused decision changes nothing")
	require.Empty(t, m.TakeDecisions())
}

func approve(id, by, digest string) machine.ResumeInput {
	return machine.ResumeInput{SuspendID: id, Payload: decision{Approved: true, Note: by}, By: by, Digest: digest}
}

func TestGovernedQuorumWithSeparationOfDuties(t *testing.T) {
	p := instance.Policy{Subjects: []string{"ana", "bo", "cy"}, Quorum: 2, SeparateDuties: true}
	m, call, model := governed(t, p, "ana")

	want, err := instance.CallDigest("desk", "ask", call.Input, 0)
	require.NoError(t, err)
	require.Equal(t, want, call.Digest)
	require.Equal(t, "ana", call.Policy.Requester, "the run's identity asked for the call")

	id, digest := call.SuspendID, call.Digest
	refused(t, m, approve(id, "ana", digest), instance.ErrSeparationOfDuties)
	refused(t, m, approve(id, "eve", digest), instance.ErrForbidden)
	refused(t, m, approve(id, "", digest), instance.ErrForbidden)
	refused(t, m, approve(id, "bo", "0000"), instance.ErrStaleDecision)
	refused(t, m, approve(id, "bo", ""), instance.ErrStaleDecision)

	// The first approval is recorded; the call waits for the second and
	// the model is not called.
	steps := run(t, m, approve(id, "bo", digest))
	require.Equal(t, machine.AwaitingResume, steps[len(steps)-1].Reason)
	require.Equal(t, 1, model.Remaining())
	pending := m.Pending()
	require.Len(t, pending, 1)
	require.Len(t, pending[0].Decisions, 1)
	require.Equal(t, "bo", pending[0].Decisions[0].By)
	require.Equal(t, []machine.Decided{{SuspendID: id, InstanceID: call.InstanceID, Node: "desk", Name: "ask",
		Decision: pending[0].Decisions[0], Outcome: machine.DecisionRecorded}}, m.TakeDecisions())
	refused(t, m, approve(id, "bo", digest), instance.ErrAlreadyDecided)

	// The decisions survive a round trip through the persisted form.
	data, err := serialize.Marshal(m)
	require.NoError(t, err)
	m, err = serialize.Unmarshal(m.Charter(), data)
	require.NoError(t, err)
	require.Equal(t, pending, m.Pending())

	steps = run(t, m, approve(id, "cy", digest))
	require.True(t, steps[len(steps)-1].Done)
	require.Empty(t, m.Pending())
	require.Equal(t, 0, model.Remaining())
	require.Contains(t, resultFor(t, m.History(), id), `"note":"cy"`, "the decision that completed the quorum is the result")
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionApproved, decided[0].Outcome)
	require.Equal(t, "cy", decided[0].Decision.By)
	refused(t, m, approve(id, "cy", digest), instance.ErrAlreadyResolved)
}

// resultFor returns the text of the tool result for suspension id.
func resultFor(t *testing.T, h []message.Message, id string) string {
	t.Helper()
	for _, msg := range h {
		for _, p := range msg.Parts {
			if p.Kind == message.KindToolResult && p.SuspendID == id {
				return p.Text
			}
		}
	}
	t.Fatalf("no tool result for %s", id)
	return ""
}

func TestGovernedFirstDenyRejects(t *testing.T) {
	p := instance.Policy{Groups: []string{"managers"}, Quorum: 2, FirstDenyRejects: true}
	m, call, _ := governed(t, p, "")
	refused(t, m, approve(call.SuspendID, "dan", call.Digest), instance.ErrForbidden) // no group
	deny := machine.ResumeInput{SuspendID: call.SuspendID, Payload: decision{Approved: false, Note: "no"},
		By: "dan", Groups: []string{"staff", "managers"}, Digest: call.Digest, Deny: true}
	steps := run(t, m, deny)
	require.True(t, steps[len(steps)-1].Done)
	require.Empty(t, m.Pending())
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionDenied, decided[0].Outcome)
}

func TestGovernedQuorumOfDenials(t *testing.T) {
	p := instance.Policy{Groups: []string{"managers"}, Quorum: 2}
	m, call, _ := governed(t, p, "")
	deny := func(by string) machine.ResumeInput {
		return machine.ResumeInput{SuspendID: call.SuspendID, Payload: decision{}, By: by, Groups: []string{"managers"}, Digest: call.Digest, Deny: true}
	}
	run(t, m, deny("dan"))
	require.Len(t, m.Pending(), 1, "one refusal of two needed")
	run(t, m, deny("eli"))
	require.Empty(t, m.Pending())
}

func TestGovernedDelegation(t *testing.T) {
	now := time.Now()
	p := instance.Policy{Subjects: []string{"ana", "bo"}, Delegations: []instance.Delegation{
		{From: "ana", To: "zoe", Until: now.Add(time.Hour)},
		{From: "zoe", To: "yan"}, // a chain: yan decides for ana through zoe
		{From: "bo", To: "old", Until: now.Add(-time.Hour)},
	}}
	m, call, _ := governed(t, p, "")
	refused(t, m, approve(call.SuspendID, "old", call.Digest), instance.ErrForbidden) // expired
	run(t, m, approve(call.SuspendID, "yan", call.Digest))
	require.Empty(t, m.Pending())
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, "ana", decided[0].Decision.For)
	require.Equal(t, "yan", decided[0].Decision.By)

	// Separation of duties holds through a delegation.
	p = instance.Policy{Subjects: []string{"ana", "bo"}, SeparateDuties: true, Delegations: []instance.Delegation{{From: "ana", To: "zoe"}}}
	m, call, _ = governed(t, p, "ana")
	refused(t, m, approve(call.SuspendID, "zoe", call.Digest), instance.ErrSeparationOfDuties)
}

func TestUngovernedDigest(t *testing.T) {
	model := scripted.New(scripted.Tool("ask", askIn{"refund"}), scripted.Text("done"))
	m := newMachine(t, charter(t, model, typedDesk(t)), "desk")
	run(t, m, machine.UserText("go"))
	call := m.Pending()[0]
	require.NotEmpty(t, call.Digest, "every suspension carries a digest")
	refused(t, m, approve(call.SuspendID, "bo", "stale"), instance.ErrStaleDecision)
	// Without a policy, a decision naming no digest goes, and is audited.
	run(t, m, approve(call.SuspendID, "bo", ""))
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionApproved, decided[0].Outcome)
}

func TestBadPolicies(t *testing.T) {
	for name, c := range map[string]struct {
		p    instance.Policy
		want error
	}{
		"no approver":      {instance.Policy{}, instance.ErrNoApprover},
		"empty subject":    {instance.Policy{Subjects: []string{" "}}, instance.ErrNoApprover},
		"quorum too large": {instance.Policy{Subjects: []string{"a", "b"}, Quorum: 3}, instance.ErrQuorumTooLarge},
		"negative quorum":  {instance.Policy{Subjects: []string{"a"}, Quorum: -1}, instance.ErrQuorumTooLarge},
		"delegation cycle": {instance.Policy{Subjects: []string{"a"}, Delegations: []instance.Delegation{{From: "a", To: "b"}, {From: "b", To: "c"}, {From: "c", To: "a"}}}, instance.ErrDelegationCycle},
		"self delegation":  {instance.Policy{Subjects: []string{"a"}, Delegations: []instance.Delegation{{From: "a", To: "a"}}}, instance.ErrDelegationCycle},
		"empty delegation": {instance.Policy{Subjects: []string{"a"}, Delegations: []instance.Delegation{{From: "a"}}}, instance.ErrDelegationCycle},
	} {
		t.Run(name, func(t *testing.T) {
			err := instance.NewSuspendRequest("x", instance.WithPolicy(c.p))
			require.ErrorIs(t, err, c.want)
			require.ErrorIs(t, err, instance.ErrBadPolicy)
			var sr *instance.SuspendRequest
			require.False(t, errors.As(err, &sr), "a bad policy fails the call rather than suspends it")
		})
	}
	// A tool whose policy is bad fails: the model sees the error, nothing
	// is pending.
	model := scripted.New(scripted.Tool("ask", askIn{"refund"}), scripted.Text("could not ask"))
	m := newMachine(t, charter(t, model, typedDesk(t, instance.WithPolicy(instance.Policy{Quorum: 2}))), "desk")
	run(t, m, machine.UserText("go"))
	require.Empty(t, m.Pending())
}

func TestCanonicalDigest(t *testing.T) {
	a, err := instance.CallDigest("desk", "pay", json.RawMessage(`{"b": 1.50, "a": [1, {"y":2,"x":1}]}`), 1)
	require.NoError(t, err)
	b, err := instance.CallDigest("desk", "pay", json.RawMessage(`{"a":[1,{"x":1,"y":2}],"b":1.50}`), 1)
	require.NoError(t, err)
	require.Equal(t, a, b, "key order and spacing do not matter")
	for _, other := range []struct {
		node, name, input string
		version           int
	}{
		{"desk", "pay", `{"a":[1,{"x":1,"y":2}],"b":1.5}`, 1},
		{"desk", "pay", `{"a":[1,{"x":1,"y":2}],"b":1.50}`, 2},
		{"desk", "refund", `{"a":[1,{"x":1,"y":2}],"b":1.50}`, 1},
		{"till", "pay", `{"a":[1,{"x":1,"y":2}],"b":1.50}`, 1},
	} {
		d, err := instance.CallDigest(other.node, other.name, json.RawMessage(other.input), other.version)
		require.NoError(t, err)
		require.NotEqual(t, a, d, "%+v", other)
	}
	_, err = instance.CallDigest("desk", "pay", json.RawMessage(`{"a":`), 0)
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
}
