package console_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// payout is a tool input whose fields a person reads: an amount, a date,
// an option.
type payout struct {
	Order  int    `json:"order" jsonschema:"the order refunded"`
	Amount int    `json:"amount" jsonschema:"in cents"`
	Due    string `json:"due"`
	Method string `json:"method" jsonschema:"how the money goes back"`
}

// ruling is an approval payload whose fields are not in alphabetical
// order, one of them required text.
type ruling struct {
	Reason   string `json:"reason" jsonschema:"why, in a sentence"`
	Approved bool   `json:"approved"`
	Amount   int    `json:"amount,omitempty"`
}

// governedStack is a console over a SQLite store whose audit log it
// shows, with a charter whose tool asks for a ruling on a payout under
// policy; clock is the console's.
func governedStack(t *testing.T, policy *instance.Policy, clock func() time.Time) (*stack, *sql.DB) {
	t.Helper()
	pay := node.NewTool("pay_out", "send the customer's money back",
		func(ctx *node.ToolContext[desk], in payout) (string, error) {
			opts := []instance.SuspendOption{instance.WithTimeout(time.Hour)}
			if policy != nil {
				opts = append(opts, instance.WithPolicy(*policy))
			}
			return "", ctx.Suspend(fmt.Sprintf("pay out order %d", in.Order), opts...)
		}, node.ResumeWith[ruling]())
	d, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{pay}})
	require.NoError(t, err)
	charter, err := machine.NewCharter(machine.CharterConfig{Nodes: []*node.Node{d}, Model: modelCalling("pay_out",
		func(order int) any {
			return payout{Order: order, Amount: 178571 * order, Due: "2026-12-01", Method: "card"}
		})})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "console.db")
	st, r := openWith(t, path, durable.Config{Charter: charter})
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return newStack(t, console.Config{Runner: r, Charter: charter, Audit: st, Now: clock}), db
}

// modelCalling is a model that, asked to "refund order N", calls tool
// with input(N), then reports the tool's result.
func modelCalling(tool string, input func(order int) any) *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if done, ok := testkit.Reported(last); ok {
			return scripted.Text(done), nil
		}
		var order int
		_, _ = fmt.Sscanf(last.Text(), "refund order %d", &order)
		return scripted.Tool(tool, input(order)), nil
	})
}

// TestDecidePageInPeoplesWords: the decide page lays the request out for
// people — the tool and its description, the input in its declared
// order with amounts grouped and dates as dates, who asked, when, the
// deadline and what happens at it — and the form's fields come in the
// payload type's order (not the alphabet's), labelled by their
// descriptions (#29).
func TestDecidePageInPeoplesWords(t *testing.T) {
	s, _ := governedStack(t, nil, nil)
	id := s.park(t, "m1", 7)
	_, body := signedIn(t, s, "ada").get("/ui/suspensions/" + id)
	for _, want := range []string{
		`The tool <code>pay_out</code>`, `send the customer&#39;s money back`,
		`<dt>amount</dt><dd data-name="amount">1,249,997<br><small>in cents</small>`,
		`<dt>due</dt><dd data-name="due">Tue 1 Dec 2026</dd>`,
		`<dd class="asked-by">the agent, at node desk</dd>`,
		`then the call fails: the agent is told no one decided in time`,
	} {
		require.Contains(t, body, want)
	}
	requireOrder(t, body, `data-name="order"`, `data-name="amount"`, `data-name="due"`, `data-name="method"`)
	requireOrder(t, body, `id="field-reason"`, `id="field-approved"`, `id="field-amount"`)
	require.Contains(t, body, `<small id="field-reason-desc">why, in a sentence</small>`)
}

// requireOrder requires each of subs in body, in that order.
func requireOrder(t *testing.T, body string, subs ...string) {
	t.Helper()
	at := -1
	for _, s := range subs {
		i := strings.Index(body, s)
		require.Greater(t, i, at, "%s out of order", s)
		at = i
	}
}

// TestRejectWithoutFilling: Reject sends no required field (the reason
// the approval asks for): the button skips the browser's checks and the
// server gives the fields left blank their zero value; the tool gets
// approved false (#29 item 11). Approve with the reason blank is
// refused at the field.
func TestRejectWithoutFilling(t *testing.T) {
	s, _ := governedStack(t, nil, nil)
	id := s.park(t, "m1", 7)
	ada := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + id
	_, body := ada.get(page)
	require.Regexp(t, `formaction="/ui/suspensions/`+id+`/reject" formnovalidate`, body)

	status, _, body := ada.post(page, page+"/resume", url.Values{"_decision": {"true"}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, `<p class="field-error" id="field-reason-err">reason: required</p>`)
	s.requireStatus(t, id, store.StatusPending)

	status, loc, _ := ada.post(page, page+"/reject", url.Values{})
	require.Equal(t, http.StatusSeeOther, status, "rejected with nothing filled in")
	require.Equal(t, "/ui/machines/m1?decided="+id, loc)
	s.requireStatus(t, id, store.StatusResolved)
	_, body = ada.get("/ui/?status=all")
	require.Contains(t, body, "declined")
}

// TestDecidePageGovernance: the decide page shows who may decide, the
// progress of a quorum (who, when), the digest, and whether the audit
// log verifies — broken once a row of it is changed (#33 point 6).
func TestDecidePageGovernance(t *testing.T) {
	clock := testkit.NewClock(time.Now()) // the console's
	s, db := governedStack(t, &instance.Policy{Subjects: []string{"ada", "bob", "cy"}, Quorum: 2, FirstDenyRejects: true}, clock.Now)
	id := s.park(t, "m1", 7)
	page := "/ui/suspensions/" + id
	ada, bob := signedIn(t, s, "ada"), signedIn(t, s, "bob")
	_, body := ada.get(page)
	require.Contains(t, body, `<dd class="policy">ada, bob or cy; 2 different people must agree; the first refusal rejects it</dd>`)
	require.Contains(t, body, `0 of 2 approvals`)
	digest := regexp.MustCompile(`name="digest" value="([^"]+)"`).FindStringSubmatch(body)[1]
	require.Contains(t, body, `<code class="digest">`+digest+`</code>`)

	status, _, _ := ada.post(page, page+"/resume", url.Values{"_decision": {"true"}, "reason": {"fine"}, "digest": {digest}})
	require.Equal(t, http.StatusSeeOther, status)
	_, body = bob.get(page)
	require.Regexp(t, `1 of 2 approvals<br>approved by ada · <time`, body)
	require.Contains(t, body, "Audit log: intact, 1 entry")
	_, body = bob.get("/ui/machines/m1")
	require.Contains(t, body, "1 of 2 approvals", "the machine page shows the request too")

	_, err := db.Exec(`UPDATE audit_log SET entry = CAST('{"forged":true}' AS BLOB) WHERE seq = 1`)
	require.NoError(t, err)
	clock.Advance(console.AuditRecheck)
	_, body = bob.get(page)
	require.Contains(t, body, "Audit log: <b>broken — entry 1 changed")

	status, _, _ = bob.post(page, page+"/reject", url.Values{"digest": {digest}})
	require.Equal(t, http.StatusSeeOther, status, "bob's refusal, nothing filled in")
	s.requireStatus(t, id, store.StatusResolved)
}

// TestInboxByDeadline: the inbox lists waiting suspensions by deadline,
// the soonest first, whatever order they came in, and marks those past
// their deadline (#29).
func TestInboxByDeadline(t *testing.T) {
	start := time.Now()
	clock := testkit.NewClock(start)
	r := openRunner(t, filepath.Join(t.TempDir(), "console.db"))
	s := newStack(t, console.Config{Runner: r, Now: clock.Now})
	// m-soon asks first, so its hour ends first: the old inbox, newest
	// first, put it last.
	sid := s.park(t, "m-soon", 1)
	call, err := r.Call(context.Background(), sid)
	require.NoError(t, err)
	s.park(t, "m-also", 2)
	ada := signedIn(t, s, "ada")
	_, body := ada.get("/ui/")
	require.NotContains(t, body, `class="badge overdue"`)
	require.Less(t, strings.Index(body, "order 1<"), strings.Index(body, "order 2<"), "the soonest deadline first")

	clock.Set(call.Deadline.Add(time.Minute))
	_, body = ada.get("/ui/")
	require.Equal(t, 2, strings.Count(body, `<span class="badge overdue">Overdue</span>`))
	require.Contains(t, body, `<tr class="row late"`)
	require.Regexp(t, `class="deadline overdue"><time [^>]+>overdue by`, body)
}
