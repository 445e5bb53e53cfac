package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// transfer is the input of the governed "pay" tool.
type transfer struct {
	Amount int    `json:"amount"`
	To     string `json:"to"`
}

// payDesk is a node whose "pay" tool suspends under the options, and
// whose resume handler pays what its input says — the edited input, when
// an approver edited it.
func payDesk(t *testing.T, opts ...instance.SuspendOption) *node.Node {
	pay := node.NewTool("pay", "pay an amount", func(ctx *node.ToolContext[counter], in transfer) (string, error) {
		return "", ctx.Suspend("payment needs approval", opts...)
	}, node.OnResume(func(ctx *node.ToolContext[counter], in transfer, r node.Resumed[decision]) (string, error) {
		if !r.Payload.Approved {
			return "not paid: " + r.Payload.Note, nil
		}
		return fmt.Sprintf("paid %d to %s", in.Amount, in.To), nil
	}))
	return mustNode(t, "desk", node.Config[counter]{Tools: []node.Tool[counter]{pay}})
}

// payMachine returns a machine, on clock, suspended on a "pay" call of
// 900 to acme under opts, and the call.
func payMachine(t *testing.T, clock func() time.Time, opts ...instance.SuspendOption) (*machine.Machine, instance.SuspendedCall) {
	t.Helper()
	model := scripted.New(scripted.Tool("pay", transfer{Amount: 900, To: "acme"}), scripted.Text("done"))
	m := newMachine(t, charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{payDesk(t, opts...)}, Clock: clock}), "desk")
	ctx := instance.WithIdentity(context.Background(), instance.Identity{Subject: "ana"})
	_, err := collect(m.Run(ctx, machine.UserText("pay acme")))
	require.NoError(t, err)
	require.Len(t, m.Pending(), 1)
	return m, m.Pending()[0]
}

func TestGovernedEdit(t *testing.T) {
	p := instance.Policy{Subjects: []string{"bo", "cy"}, Quorum: 2, AllowEdit: true}
	m, call := payMachine(t, nil, instance.WithPolicy(p))
	require.NotEmpty(t, call.InputSchema, "a call whose policy allows edits records the tool's input schema")
	id, digest := call.SuspendID, call.Digest
	edit := func(by, digest string, input string) machine.ResumeInput {
		in := approve(id, by, digest)
		in.Edit = json.RawMessage(input)
		return in
	}
	// Bad edits are refused, naming the field, and change nothing.
	refused(t, m, edit("bo", digest, `{"amount":"lots","to":"acme"}`), instance.ErrInvalidInput)
	var ie *instance.InputError
	_, err := collect(m.Run(context.Background(), edit("bo", digest, `{"amount":"lots","to":"acme"}`)))
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "amount", ie.Field)
	refused(t, m, edit("bo", digest, `{"amount":`), instance.ErrPayloadDecode)
	denyEdit := edit("bo", digest, `{"amount":500,"to":"acme"}`)
	denyEdit.Deny = true
	refused(t, m, denyEdit, instance.ErrEditNotAllowed)
	refused(t, m, edit("eve", digest, `{"amount":500,"to":"acme"}`), instance.ErrForbidden)

	// cy approves the call as it is; bo then edits it: the digest changes,
	// cy's approval of the old action is dropped.
	run(t, m, approve(id, "cy", digest))
	run(t, m, edit("bo", digest, `{"to":"acme", "amount":500}`))
	got := m.Pending()[0]
	require.JSONEq(t, `{"amount":500,"to":"acme"}`, string(got.Input))
	want, err := instance.CallDigest("desk", "pay", json.RawMessage(`{"amount":500,"to":"acme"}`), 0)
	require.NoError(t, err)
	require.Equal(t, want, got.Digest)
	require.Len(t, got.Decisions, 1, "approvals of the old input are dropped")
	require.Equal(t, want, got.Decisions[0].EditDigest)
	require.Equal(t, digest, got.Decisions[0].Digest)
	decided := m.TakeDecisions()
	require.Len(t, decided, 2)
	require.Equal(t, want, decided[1].Decision.EditDigest)

	// A decision on the old digest is stale now; cy approves the edit.
	refused(t, m, approve(id, "cy", digest), instance.ErrStaleDecision)
	steps := run(t, m, approve(id, "cy", got.Digest))
	require.True(t, steps[len(steps)-1].Done)
	text := resultFor(t, m.History(), id)
	require.True(t, strings.HasSuffix(text, "paid 500 to acme"), "the tool ran with the edited input: %q", text)
	require.Contains(t, text, `bo edited the input before approving; the call ran with {"amount":500,"to":"acme"}`)
	var rec machine.EditedRecord
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.Kind == message.KindRecord && p.Name == "edited" {
				require.NoError(t, json.Unmarshal(p.Data, &rec))
			}
		}
	}
	require.Equal(t, machine.EditedRecord{By: "bo", From: digest, To: want, Input: json.RawMessage(`{"amount":500,"to":"acme"}`), Before: json.RawMessage(`{"amount":900,"to":"acme"}`)}, rec)
}

func TestEditNeedsPolicy(t *testing.T) {
	for name, opts := range map[string][]instance.SuspendOption{
		"ungoverned": nil,
		"no edits":   {instance.WithPolicy(instance.Policy{Subjects: []string{"bo"}})},
	} {
		t.Run(name, func(t *testing.T) {
			m, call := payMachine(t, nil, opts...)
			in := approve(call.SuspendID, "bo", call.Digest)
			in.Edit = transfer{Amount: 1, To: "me"}
			refused(t, m, in, instance.ErrEditNotAllowed)
		})
	}
}

func TestTimeoutDeny(t *testing.T) {
	clock := newClock()
	m, call := payMachine(t, clock.Now, instance.WithPolicy(instance.Policy{Subjects: []string{"bo"}}),
		instance.WithTimeout(time.Hour), instance.OnTimeoutDeny(decision{Note: "nobody answered"}))
	clock.Set(clock.Now().Add(time.Hour))
	steps := run(t, m)
	require.True(t, steps[len(steps)-1].Done)
	require.Equal(t, "not paid: nobody answered", resultFor(t, m.History(), call.SuspendID))
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionDenied, decided[0].Outcome)
	require.True(t, decided[0].Decision.Deny)
	require.Empty(t, decided[0].Decision.By)
}

func TestTimeoutEscalates(t *testing.T) {
	clock := newClock()
	directors := instance.Policy{Groups: []string{"directors"}}
	p := instance.Policy{Version: 3, Subjects: []string{"bo"}, Escalation: &instance.Escalation{Policy: directors, Timeout: 2 * time.Hour}}
	m, call := payMachine(t, clock.Now, instance.WithPolicy(p), instance.WithTimeout(time.Hour))

	// bo does not answer within the hour: the call is re-asked of the
	// directors, with a new deadline and digest.
	clock.Set(clock.Now().Add(time.Hour))
	steps := run(t, m)
	last := steps[len(steps)-1]
	require.True(t, last.NeedsResume(), "an escalation is not a silent continue: the call waits")
	var escalated []instance.Event
	for _, s := range steps {
		for _, e := range s.Events {
			if e.Type == instance.EventEscalated {
				escalated = append(escalated, e)
			}
		}
	}
	require.Len(t, escalated, 1)
	got := m.Pending()[0]
	require.Equal(t, call.SuspendID, got.SuspendID)
	require.Equal(t, 4, got.Policy.Version, "raised above the old version")
	require.Equal(t, []string{"directors"}, got.Policy.Groups)
	require.Equal(t, "ana", got.Policy.Requester)
	require.Equal(t, clock.Now().Add(2*time.Hour), got.Deadline)
	want, err := instance.CallDigest("desk", "pay", call.Input, 4)
	require.NoError(t, err)
	require.Equal(t, want, got.Digest)
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionEscalated, decided[0].Outcome)

	refused(t, m, approve(call.SuspendID, "bo", got.Digest), instance.ErrForbidden)
	refused(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: decision{Approved: true}, By: "di",
		Groups: []string{"directors"}, Digest: call.Digest}, instance.ErrStaleDecision)
	steps = run(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: decision{Approved: true}, By: "di",
		Groups: []string{"directors"}, Digest: got.Digest})
	require.True(t, steps[len(steps)-1].Done)
	require.Equal(t, "paid 900 to acme", resultFor(t, m.History(), call.SuspendID))
}

func TestEscalationThenDeadline(t *testing.T) {
	clock := newClock()
	p := instance.Policy{Subjects: []string{"bo"}, Escalation: &instance.Escalation{Policy: instance.Policy{Subjects: []string{"cy"}}, Timeout: time.Hour}}
	m, call := payMachine(t, clock.Now, instance.WithPolicy(p), instance.WithTimeout(time.Hour), instance.OnTimeoutDeny(decision{Note: "late"}))
	clock.Set(clock.Now().Add(time.Hour))
	run(t, m)
	clock.Set(clock.Now().Add(time.Hour))
	steps := run(t, m)
	require.True(t, steps[len(steps)-1].Done)
	require.Equal(t, "not paid: late", resultFor(t, m.History(), call.SuspendID))
	var outcomes []string
	for _, d := range m.TakeDecisions() {
		outcomes = append(outcomes, d.Outcome)
	}
	require.Equal(t, []string{machine.DecisionEscalated, machine.DecisionDenied}, outcomes)
}

func TestBadEscalation(t *testing.T) {
	for name, e := range map[string]instance.Escalation{
		"no timeout":  {Policy: instance.Policy{Subjects: []string{"cy"}}},
		"no approver": {Policy: instance.Policy{}, Timeout: time.Hour},
	} {
		err := instance.Policy{Subjects: []string{"bo"}, Escalation: &e}.Check()
		require.ErrorIs(t, err, instance.ErrBadPolicy, name)
	}
}

func TestGovernedCancel(t *testing.T) {
	m, call := payMachine(t, nil, instance.WithPolicy(instance.Policy{Groups: []string{"managers"}}))
	before := snap(m)
	_, err := collect(m.Run(context.Background(), machine.CancelInput{SuspendID: call.SuspendID, By: "eve"}))
	require.ErrorIs(t, err, instance.ErrForbidden)
	requireUnchanged(t, before, m)
	run(t, m, machine.CancelInput{SuspendID: call.SuspendID, By: "mo", Groups: []string{"managers"}, Reason: "duplicate"})
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionCancelled, decided[0].Outcome)
	require.Equal(t, "mo", decided[0].Decision.By)
}

func TestCommandAndSignalResumesAudited(t *testing.T) {
	m, id := typedSignalled(t)
	run(t, m, machine.SignalInput{Event: "ci.passed", Payload: decision{Approved: true}, By: "ci"})
	decided := m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionSignal, decided[0].Outcome)
	require.Equal(t, "ci", decided[0].Decision.By)
	require.Equal(t, id, decided[0].SuspendID)

	m, _, id = typedSuspended(t, scripted.Text("ok"))
	run(t, m, grantInvocation(id))
	decided = m.TakeDecisions()
	require.Len(t, decided, 1)
	require.Equal(t, machine.DecisionCommand, decided[0].Outcome)
	require.Equal(t, "grant", decided[0].Decision.By)
}

// typedSignalled returns a machine whose typed "ask" call also waits for
// the event "ci.passed", and its suspend ID.
func typedSignalled(t *testing.T) (*machine.Machine, string) {
	t.Helper()
	model := scripted.New(scripted.Tool("ask", askIn{"refund"}), scripted.Text("ok"))
	m := newMachine(t, charter(t, model, typedDesk(t, instance.WithEvent("ci.passed"))), "desk")
	run(t, m, machine.UserText("refund"))
	require.Len(t, m.Pending(), 1)
	return m, m.Pending()[0].SuspendID
}

// grantInvocation invokes the "grant" command of typedDesk on id.
func grantInvocation(id string) command.Invocation {
	return command.Invocation{Name: "grant", Input: map[string]any{"id": id, "payload": decision{Approved: true}}}
}

// FuzzEdit sends arbitrary edits to a call whose policy allows them: an
// edit is either refused with a typed error, changing nothing, or
// accepted, and then the call holds it as canonical JSON fitting the
// tool's input schema and its digest is the edited input's.
func FuzzEdit(f *testing.F) {
	for _, seed := range []string{`{"amount":5,"to":"x"}`, `{"amount":"5"}`, `{}`, `null`, `[1]`, `{"amount":1e400,"to":""}`, `{"to":"a","amount":2,"x":1}`, `"`, ``} {
		f.Add([]byte(seed))
	}
	p := instance.Policy{Subjects: []string{"bo", "cy"}, Quorum: 2, AllowEdit: true}
	f.Fuzz(func(t *testing.T, edit []byte) {
		m, call := payMachine(t, nil, instance.WithPolicy(p))
		before := snap(m)
		in := approve(call.SuspendID, "bo", call.Digest)
		in.Edit = json.RawMessage(edit)
		_, err := collect(m.Run(context.Background(), in))
		if err != nil {
			typed := errors.Is(err, instance.ErrInvalidInput) || errors.Is(err, instance.ErrPayloadDecode) || errors.Is(err, instance.ErrEditNotAllowed)
			require.True(t, typed, "untyped refusal: %v", err)
			requireUnchanged(t, before, m)
			return
		}
		got := m.Pending()[0]
		canon, cerr := instance.CanonicalJSON(edit)
		require.NoError(t, cerr)
		require.Equal(t, string(canon), string(got.Input))
		var tr transfer
		require.NoError(t, json.Unmarshal(got.Input, &tr), "an accepted edit fits the input type")
		want, derr := instance.CallDigest("desk", "pay", got.Input, 0)
		require.NoError(t, derr)
		require.Equal(t, want, got.Digest)
	})
}
