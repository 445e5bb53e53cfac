package resumehttp_test

import (
	"context"
	"encoding/json"
	"net/http"
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
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// governedEnv serves a till whose "transfer" tool waits for two of ana,
// bo and cy, never the one who asked.
func governedEnv(t *testing.T) *env {
	return governedEnvWith(t, instance.Policy{Subjects: []string{"ana", "bo", "cy"}, Quorum: 2, SeparateDuties: true})
}

// governedEnvWith serves a till whose "transfer" tool waits under p and,
// resumed, says what it transferred.
func governedEnvWith(t *testing.T, p instance.Policy) *env {
	t.Helper()
	transfer := node.NewTool("transfer", "transfer money", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("two approvers", instance.WithPolicy(p))
	}, node.OnResume(func(ctx *node.ToolContext[counter], in askIn, r node.Resumed[string]) (string, error) {
		return "sent " + in.What, nil
	}))
	n, err := node.New("till", node.Config[counter]{Tools: []node.Tool[counter]{transfer}})
	require.NoError(t, err)
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		for _, m := range req.Messages {
			if m.Role == message.Tool {
				return scripted.Reply{Text: "transferred"}, nil
			}
		}
		return scripted.Reply{Calls: []scripted.Call{{ID: "t1", Name: "transfer", Input: askIn{What: "100 EUR"}}}}, nil
	})
	e := &env{clock: testkit.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)), logs: &syncBuffer{}}
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Clock: e.clock.Now})
	require.NoError(t, err)
	st := memstore.New()
	st.Now = e.clock.Now
	e.runner, err = durable.New(durable.Config{Store: st, Charter: c})
	require.NoError(t, err)
	e.listen(t, resumehttp.Config{Runner: e.runner, Secret: secret, Clock: e.clock.Now}, nil)
	return e
}

// parkTill creates a till and runs it, in ctx, until its transfer waits
// for a decision, and returns the machine's and the suspension's IDs.
func (e *env) parkTill(t *testing.T, ctx context.Context) (id, sid string) {
	t.Helper()
	id, err := e.runner.Create(ctx, "till", "till", nil)
	require.NoError(t, err)
	for _, err := range e.runner.Run(ctx, id, machine.UserText("send 100 EUR")) {
		require.NoError(t, err)
	}
	pending, err := e.runner.Pending(ctx, store.Filter{MachineID: id})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	return id, pending[0].ID
}

// decide is the body of a decision by by on digest.
func decide(by, digest string) string {
	b, _ := json.Marshal(resumehttp.ResumeRequest{Payload: json.RawMessage(`"ok by ` + by + `"`), By: by, Digest: digest})
	return string(b)
}

// Over HTTP a governed suspension shows its digest and policy; a decision
// from an identity the policy refuses is 403, one on another digest 409
// stale_decision, a second by the same approver 409 already_decided —
// each changing nothing — and two approvals resolve it.
func TestGovernedOverHTTP(t *testing.T) {
	e := governedEnv(t)
	id, sid := e.parkTill(t, instance.WithIdentity(context.Background(), instance.Identity{Subject: "ana"}))

	sus := requireOK[resumehttp.Suspension](t, e.call(t, http.MethodGet, "/suspensions/"+sid, ""))
	require.NotEmpty(t, sus.Digest)
	require.NotNil(t, sus.Policy)
	require.Equal(t, 2, sus.Policy.Quorum)
	require.Equal(t, "ana", sus.Policy.Requester)

	before := e.fingerprint(t, id)
	requireError(t, e.call(t, http.MethodPost, resumePath(sid), decide("eve", sus.Digest)), http.StatusForbidden, "forbidden")
	requireError(t, e.call(t, http.MethodPost, resumePath(sid), decide("ana", sus.Digest)), http.StatusForbidden, "forbidden")
	requireError(t, e.call(t, http.MethodPost, resumePath(sid), decide("bo", "not-"+sus.Digest)), http.StatusConflict, "stale_decision")
	e.requireUnchanged(t, before, id)

	sum := requireOK[resumehttp.Summary](t, e.call(t, http.MethodPost, resumePath(sid), decide("bo", sus.Digest)))
	require.Equal(t, []string{sid}, sum.Pending, "one approval of two")
	sus = requireOK[resumehttp.Suspension](t, e.call(t, http.MethodGet, "/suspensions/"+sid, ""))
	require.Len(t, sus.Decisions, 1)
	require.Equal(t, "bo", sus.Decisions[0].By)
	e.clock.Advance(time.Second) // not a redelivery of the same signed request
	requireError(t, e.call(t, http.MethodPost, resumePath(sid), decide("bo", sus.Digest)), http.StatusConflict, "already_decided")

	sum = requireOK[resumehttp.Summary](t, e.call(t, http.MethodPost, resumePath(sid), decide("cy", sus.Digest)))
	require.True(t, sum.Done)
	require.Empty(t, sum.Pending)
	require.Equal(t, "transferred", sum.Text)
}

// Over HTTP an edit travels in the signed body: one the input schema
// refuses is 400 invalid_input naming the field, changing nothing; an
// accepted one runs the tool with the edited input. A person the policy does not name cannot cancel (403).
func TestEditOverHTTP(t *testing.T) {
	e := governedEnvWith(t, instance.Policy{Subjects: []string{"bo"}, AllowEdit: true})
	ctx := context.Background()
	id, sid := e.parkTill(t, ctx)
	sus := requireOK[resumehttp.Suspension](t, e.call(t, http.MethodGet, "/suspensions/"+sid, ""))
	require.True(t, sus.Policy.AllowEdit)

	edit := func(input string) string {
		b, _ := json.Marshal(resumehttp.ResumeRequest{Payload: json.RawMessage(`"ok"`), By: "bo", Digest: sus.Digest, Edit: json.RawMessage(input)})
		return string(b)
	}
	before := e.fingerprint(t, id)
	body := requireError(t, e.call(t, http.MethodPost, resumePath(sid), edit(`{"what":5}`)), http.StatusBadRequest, "invalid_input")
	require.Contains(t, body.Error, "what")
	requireError(t, e.call(t, http.MethodDelete, "/suspensions/"+sid, `{"by":"eve"}`), http.StatusForbidden, "forbidden")
	e.requireUnchanged(t, before, id)

	sum := requireOK[resumehttp.Summary](t, e.call(t, http.MethodPost, resumePath(sid), edit(`{"what":"50 EUR"}`)))
	require.True(t, sum.Done)
	m, _, err := e.runner.Load(ctx, id)
	require.NoError(t, err)
	var results []string
	for _, p := range testkit.SuspendParts(m.History(), sid) {
		if p.Kind == message.KindToolResult {
			results = append(results, p.Text)
		}
	}
	require.Equal(t, []string{"[bo edited the input before approving; the call ran with {\"what\":\"50 EUR\"}]\nsent 50 EUR"}, results)
}
