package durable_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// spendIn is the input of the governed "pay" tool.
type spendIn struct {
	Amount int `json:"amount"`
}

// payPolicy governs every payment: two of ana, bo, cy and dee, never the
// one who asked.
var payPolicy = instance.Policy{Version: 1, Subjects: []string{"ana", "bo", "cy", "dee"}, Quorum: 2, SeparateDuties: true}

// governedCharter is a till whose "pay" tool waits for payPolicy's
// approvers; its model asks to pay 120 once, then says "paid".
func governedCharter() (*machine.Charter, error) {
	pay := node.NewTool("pay", "pay an amount", func(ctx *node.ToolContext[desk], in spendIn) (string, error) {
		return "", ctx.Suspend("payment needs two approvers", instance.WithPolicy(payPolicy))
	})
	n, err := node.New("till", node.Config[desk]{Tools: []node.Tool[desk]{pay}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: payModel("paid"), Nodes: []*node.Node{n}})
}

// payModel asks to pay 120 once, then says done.
func payModel(done string) llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		for _, m := range req.Messages {
			if m.Role == message.Tool {
				return scripted.Reply{Text: done}, nil
			}
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: "pay-1", Name: "pay", Input: spendIn{Amount: 120}}}}, nil
	})
}

func governedRunner(t testing.TB, s store.Store, key ed25519.PrivateKey) *durable.Runner {
	t.Helper()
	c, err := governedCharter()
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c, AuditKey: key})
	require.NoError(t, err)
	return r
}

// governedCall creates machine id, runs it on behalf of requester until
// it waits for the payment's approvers, and returns the call.
func governedCall(t testing.TB, r *durable.Runner, id, requester string) instance.SuspendedCall {
	t.Helper()
	ctx := context.Background()
	_, err := r.Create(ctx, id, "till", nil)
	require.NoError(t, err)
	_, err = drain(r.Run(instance.WithIdentity(ctx, instance.Identity{Subject: requester}), id, machine.UserText("pay 120")))
	require.NoError(t, err)
	pending, err := r.Pending(ctx, store.Filter{MachineID: id})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	call, err := r.Call(ctx, pending[0].ID)
	require.NoError(t, err)
	return call
}

func payDecision(call instance.SuspendedCall, by string) machine.ResumeInput {
	return machine.ResumeInput{SuspendID: call.SuspendID, Payload: "approved by " + by, By: by, Digest: call.Digest}
}

// auditRecords verifies the audit log of s with key and returns its
// records.
func auditRecords(t *testing.T, s store.Store, key ed25519.PublicKey) []durable.AuditRecord {
	t.Helper()
	var out []durable.AuditRecord
	_, err := store.VerifyAudit(context.Background(), s.(store.AuditLog), key, func(e store.AuditEntry) error {
		var rec durable.AuditRecord
		if err := json.Unmarshal(e.Entry, &rec); err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	require.NoError(t, err)
	return out
}

// A governed payment on each store: refusals change nothing and are
// audited, the first approval is recorded, the second resolves the call,
// and the audit log verifies with the runner's key and not another.
func TestGovernedDecisionsAudited(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		pub, key, err := ed25519.GenerateKey(nil)
		require.NoError(t, err)
		r := governedRunner(t, s, key)
		call := governedCall(t, r, "till-1", "ana")
		require.Equal(t, "ana", call.Policy.Requester)

		_, err = r.Resume(ctx, payDecision(call, "ana"))
		require.ErrorIs(t, err, instance.ErrSeparationOfDuties)
		stale := payDecision(call, "bo")
		stale.Digest = "seen-something-else"
		_, err = r.Resume(ctx, stale)
		require.ErrorIs(t, err, instance.ErrStaleDecision)

		steps, err := runSteps(r.Resume(ctx, payDecision(call, "bo")))
		require.NoError(t, err)
		require.True(t, steps[len(steps)-1].NeedsResume(), "one approval of two")
		got, err := r.Call(ctx, call.SuspendID)
		require.NoError(t, err)
		require.Len(t, got.Decisions, 1)
		_, err = r.Resume(ctx, payDecision(call, "bo"))
		require.ErrorIs(t, err, instance.ErrAlreadyDecided)

		steps, err = runSteps(r.Resume(ctx, payDecision(call, "cy")))
		require.NoError(t, err)
		last := steps[len(steps)-1]
		require.True(t, last.Done)
		require.False(t, last.NeedsResume())
		_, err = r.Resume(ctx, payDecision(call, "dee"))
		require.ErrorIs(t, err, instance.ErrAlreadyResolved)

		recs := auditRecords(t, s, pub)
		type row struct{ kind, outcome, by string }
		var rows []row
		for _, rec := range recs {
			require.Equal(t, "till-1", rec.MachineID)
			require.Equal(t, call.SuspendID, rec.SuspendID)
			rows = append(rows, row{rec.Kind, rec.Outcome, rec.By})
		}
		require.Equal(t, []row{
			{durable.AuditRefusal, "", "ana"},
			{durable.AuditRefusal, "", "bo"}, // stale
			{durable.AuditDecision, machine.DecisionRecorded, "bo"},
			{durable.AuditRefusal, "", "bo"}, // decided already
			{durable.AuditDecision, machine.DecisionApproved, "cy"},
		}, rows)
		require.Equal(t, call.Digest, recs[2].Digest)
		require.Equal(t, "pay", recs[4].Name)

		other, _, err := ed25519.GenerateKey(nil)
		require.NoError(t, err)
		_, err = store.VerifyAudit(ctx, s.(store.AuditLog), other, nil)
		require.ErrorIs(t, err, store.ErrAuditBroken)
	})
}

// childGovern decides, as MARKOV_BY, the payment MARKOV_SUSPEND_ID of
// digest MARKOV_DIGEST once told to go, and says "decided".
func childGovern() int {
	return withRunner(governedCharter, func(r *durable.Runner) int {
		if err := testkit.AwaitGo(); err != nil {
			return 2
		}
		by := os.Getenv("MARKOV_BY")
		in := machine.ResumeInput{SuspendID: os.Getenv("MARKOV_SUSPEND_ID"), Payload: "approved by " + by, By: by, Digest: os.Getenv("MARKOV_DIGEST")}
		var err error
		if os.Getenv("MARKOV_ACCEPT") != "" {
			// The acceptor's path (resumehttp with Config.Acceptor set
			// to the runner): applied and saved, the run in the
			// background, waited for before the process exits.
			var a durable.Accepted
			if a, err = r.AcceptResume(context.Background(), in); err == nil {
				_, err = r.Await(context.Background(), a)
			}
		} else {
			_, err = runSteps(r.Resume(context.Background(), in))
		}
		if err != nil {
			fmt.Println("error:", err)
			return 0
		}
		fmt.Println("decided")
		return 0
	})
}

// governedRace has two processes make the two approvals a payment needs
// at the same moment, on store s (env tells the children where it is):
// both are recorded, once each, and the payment resolves once.
func governedRace(t *testing.T, s store.Store, env ...string) {
	r := governedRunner(t, s, nil)
	call := governedCall(t, r, "race", "ana")
	child := func(by string) *exec.Cmd {
		return testkit.ChildCommand(append([]string{"MARKOV_CHILD=govern", "MARKOV_BY=" + by,
			"MARKOV_SUSPEND_ID=" + call.SuspendID, "MARKOV_DIGEST=" + call.Digest}, env...)...)
	}
	results, err := testkit.RaceChildren(child("bo"), child("cy"))
	require.NoError(t, err)
	require.Equal(t, []string{"decided", "decided"}, results)

	m, _, err := r.Load(context.Background(), "race")
	require.NoError(t, err)
	require.Empty(t, m.Pending())
	results = nil
	for _, p := range testkit.SuspendParts(m.History(), call.SuspendID) {
		if p.Kind == message.KindToolResult {
			results = append(results, p.Text)
		}
	}
	require.Len(t, results, 1, "resolved once")
	outcomes := map[string]string{}
	for _, rec := range auditRecords(t, s, nil) {
		require.Empty(t, outcomes[rec.By], "%s recorded once", rec.By)
		outcomes[rec.By] = rec.Outcome
	}
	require.Len(t, outcomes, 2)
	require.ElementsMatch(t, []string{machine.DecisionRecorded, machine.DecisionApproved}, []string{outcomes["bo"], outcomes["cy"]})
}

func TestGovernedRaceSQLite(t *testing.T) {
	db := filepath.Join(t.TempDir(), "govern.db")
	governedRace(t, openSQLite(t, db), "MARKOV_DB="+db)
}

func TestGovernedRacePostgres(t *testing.T) {
	s, _, schema := pgtest.Open(t)
	governedRace(t, s, "MARKOV_PG_SCHEMA="+schema)
}

// The same race through AcceptResume, the path of an HTTP service whose
// acceptor is the runner: neither approver is told already_resolved.
func TestGovernedAcceptRaceSQLite(t *testing.T) {
	db := filepath.Join(t.TempDir(), "govern.db")
	governedRace(t, openSQLite(t, db), "MARKOV_DB="+db, "MARKOV_ACCEPT=1")
}

func TestGovernedAcceptRacePostgres(t *testing.T) {
	s, _, schema := pgtest.Open(t)
	governedRace(t, s, "MARKOV_PG_SCHEMA="+schema, "MARKOV_ACCEPT=1")
}

// editCharter is a till on clock whose "pay" tool waits for bo or cy,
// who may edit the amount; an hour without an answer escalates it to
// the directors for an hour, and then it is denied. Its handler pays the
// amount its input says.
func editCharter(clock func() time.Time) (*machine.Charter, error) {
	p := instance.Policy{Subjects: []string{"bo", "cy"}, AllowEdit: true,
		Escalation: &instance.Escalation{Policy: instance.Policy{Groups: []string{"directors"}, AllowEdit: true}, Timeout: time.Hour}}
	pay := node.NewTool("pay", "pay an amount", func(ctx *node.ToolContext[desk], in spendIn) (string, error) {
		return "", ctx.Suspend("payment needs approval", instance.WithPolicy(p), instance.WithTimeout(time.Hour), instance.OnTimeoutDeny("nobody answered"))
	}, node.OnResume(func(ctx *node.ToolContext[desk], in spendIn, r node.Resumed[string]) (string, error) {
		if len(r.Decisions) > 0 && r.Decisions[len(r.Decisions)-1].Deny {
			return "not paid: " + r.Payload, nil
		}
		return fmt.Sprintf("paid %d", in.Amount), nil
	}))
	n, err := node.New("till", node.Config[desk]{Tools: []node.Tool[desk]{pay}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: payModel("done"), Nodes: []*node.Node{n}, Clock: clock})
}

func editRunner(t *testing.T, s store.Store, clock func() time.Time) *durable.Runner {
	t.Helper()
	c, err := editCharter(clock)
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: s, Charter: c})
	require.NoError(t, err)
	return r
}

// auditRows is the kind, outcome and by of each audit record of s.
func auditRows(t *testing.T, s store.Store) []string {
	var rows []string
	for _, rec := range auditRecords(t, s, nil) {
		rows = append(rows, rec.Kind+" "+rec.Outcome+" "+rec.By)
	}
	return rows
}

// On each store: a bad edit is refused (naming the field) and changes
// nothing; a good one is saved, the handler pays the edited amount, the
// model is told who edited it, and the audit log holds both digests.
func TestGovernedEditAudited(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r := editRunner(t, s, nil)
		call := governedCall(t, r, "till-e", "ana")
		bad := payDecision(call, "bo")
		bad.Edit = json.RawMessage(`{"amount":"all of it"}`)
		_, err := r.Resume(ctx, bad)
		var ie *instance.InputError
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "amount", ie.Field)
		got, err := r.Call(ctx, call.SuspendID)
		require.NoError(t, err)
		require.Equal(t, call.Digest, got.Digest, "nothing changed")

		good := payDecision(call, "bo")
		good.Edit = spendIn{Amount: 80}
		steps, err := runSteps(r.Resume(ctx, good))
		require.NoError(t, err)
		require.True(t, steps[len(steps)-1].Done)
		m, _, err := r.Load(ctx, "till-e")
		require.NoError(t, err)
		var results []string
		for _, p := range testkit.SuspendParts(m.History(), call.SuspendID) {
			if p.Kind == message.KindToolResult {
				results = append(results, p.Text)
			}
		}
		require.Equal(t, []string{"[bo edited the input before approving; the call ran with {\"amount\":80}]\npaid 80"}, results)
		recs := auditRecords(t, s, nil)
		require.Len(t, recs, 1)
		want, err := instance.CallDigest("till", "pay", json.RawMessage(`{"amount":80}`), 0)
		require.NoError(t, err)
		require.Equal(t, call.Digest, recs[0].Digest)
		require.Equal(t, want, recs[0].EditDigest)
		require.Equal(t, machine.DecisionApproved, recs[0].Outcome)
	})
}

// On each store, the sweeper escalates a payment nobody decided at its
// deadline, then denies it at the escalation's: each step an event on
// the machine's log and an audit entry; the call never continues
// silently.
func TestTimeoutPoliciesAudited(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		clock := testkit.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
		r := editRunner(t, s, clock.Now)
		call := governedCall(t, r, "till-t", "ana")
		clock.Set(clock.Now().Add(time.Hour))
		n, err := r.Sweep(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		pending, err := r.Pending(ctx, store.Filter{MachineID: "till-t"})
		require.NoError(t, err)
		require.Len(t, pending, 1, "escalated, still pending")
		require.Equal(t, clock.Now().Add(time.Hour), pending[0].Deadline.UTC(), "the index has the new deadline")
		esc, err := r.Call(ctx, call.SuspendID)
		require.NoError(t, err)
		require.NotEqual(t, call.Digest, esc.Digest)
		require.Equal(t, []string{"directors"}, esc.Policy.Groups)

		clock.Set(clock.Now().Add(time.Hour))
		n, err = r.Sweep(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		m, _, err := r.Load(ctx, "till-t")
		require.NoError(t, err)
		require.Empty(t, m.Pending())
		var results []string
		for _, p := range testkit.SuspendParts(m.History(), call.SuspendID) {
			if p.Kind == message.KindToolResult {
				results = append(results, p.Text)
			}
		}
		require.Equal(t, []string{"not paid: nobody answered"}, results)
		require.Equal(t, []string{"decision escalated ", "decision denied "}, auditRows(t, s))

		var kinds []machine.EventKind
		for e, err := range r.Watch(ctx, "till-t", 0) {
			require.NoError(t, err)
			if e.Kind == machine.EventEscalated || e.Kind == machine.EventExpired {
				kinds = append(kinds, e.Kind)
			}
			if e.Kind == machine.EventExpired {
				break
			}
		}
		require.Equal(t, []machine.EventKind{machine.EventEscalated, machine.EventExpired}, kinds)
	})
}

// On each store a person's cancel is audited, and a person the policy
// does not name cannot cancel: refused, through Cancel and AcceptCancel,
// and audited as a refusal.
func TestCancelAudited(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		r := editRunner(t, s, nil)
		call := governedCall(t, r, "till-c", "ana")
		_, err := r.Cancel(ctx, machine.CancelInput{SuspendID: call.SuspendID, By: "eve"})
		require.ErrorIs(t, err, instance.ErrForbidden)
		_, err = r.AcceptCancel(ctx, machine.CancelInput{SuspendID: call.SuspendID, By: "eve", Groups: []string{"staff"}})
		require.ErrorIs(t, err, instance.ErrForbidden)
		_, err = runSteps(r.Cancel(ctx, machine.CancelInput{SuspendID: call.SuspendID, By: "cy", Reason: "duplicate"}))
		require.NoError(t, err)
		require.Equal(t, []string{"refusal  eve", "refusal  eve", "decision cancelled cy"}, auditRows(t, s))
	})
}
