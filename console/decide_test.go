package console_test

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
	"github.com/markov-agents/markov/store/sqlite"
)

// gated is a stack whose runner's model is g, with machine id parked on
// it for a refund of order.
func gated(t *testing.T, id string, order int) (*stack, *gate, string) {
	t.Helper()
	g := &gate{}
	charter, err := charterWith(g.model())
	require.NoError(t, err)
	r := openRunnerOn(t, filepath.Join(t.TempDir(), "console.db"), charter)
	s := newStack(t, console.Config{Runner: r, Charter: charter})
	return s, g, s.park(t, id, order)
}

// waitPage polls the page at path until its body contains want, and
// returns the body.
func (c *client) waitPage(path, want string) string {
	c.t.Helper()
	var body string
	require.Eventually(c.t, func() bool {
		_, body = c.get(path)
		return strings.Contains(body, want)
	}, 30*time.Second, 20*time.Millisecond, "%s never showed %q", path, want)
	return body
}

// TestDecisionAnswersAtOnce: approving answers as soon as the decision is
// durable, while the agent's run still waits for its model (#29 item 2):
// the machine page says the decision is recorded; a second click by the
// same person says it was applied, one by someone else names who decided.
func TestDecisionAnswersAtOnce(t *testing.T) {
	s, g, id := gated(t, "m1", 42)
	release := g.holdCalls()
	defer release()
	ada, grace := signedIn(t, s, "ada"), signedIn(t, s, "grace")
	ada.http.Timeout, grace.http.Timeout = 10*time.Second, 10*time.Second // the old console held the POST for the run
	page := "/ui/suspensions/" + id

	status, loc, _ := ada.post(page, page+"/resume", url.Values{"_decision": {"true"}, "note": {"fine"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/machines/m1?decided="+id, loc)
	s.requireStatus(t, id, store.StatusResolved)
	_, body := ada.get(loc)
	require.Contains(t, body, "Decision recorded; the agent is continuing.")

	status, _, body = ada.post(page, page+"/resume", url.Values{"_decision": {"true"}})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "You already decided this suspension; your decision was applied.")
	require.NotContains(t, body, "Someone else")
	status, _, body = grace.post(page, page+"/cancel", url.Values{"reason": {"late"}})
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, body, "ada decided this suspension first; your decision was not applied.")

	release()
	body = ada.waitPage("/ui/machines/m1", `<span class="status done">done</span>`) // the answer is saved, then the run ends
	require.Contains(t, body, "Refund approved")
	_, body = ada.get(page)
	require.Contains(t, body, "This suspension was <b>approved</b> by <b>ada</b>")
}

// TestDecisionModelDown: the model is down when a decision is made (#29
// item 1). The person sees the machine page with the decision recorded,
// never an error page or the model's address; the run that failed is
// left for the next start of the server (Runner.Recover), which finishes
// it with the decision applied.
func TestDecisionModelDown(t *testing.T) {
	s, g, id := gated(t, "m1", 42)
	g.failNext(1)
	c := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + id
	status, loc, body := c.post(page, page+"/resume", url.Values{"_decision": {"true"}})
	require.Equal(t, http.StatusSeeOther, status, body)
	require.NotContains(t, body, "10.0.0.7")
	body = c.waitPage(loc, "run stopped before its end")
	require.Contains(t, body, "Decision recorded; the agent is continuing.")
	require.NotContains(t, body, "10.0.0.7")
	s.requireStatus(t, id, store.StatusResolved)

	n, err := s.runner.Recover(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	body = c.waitPage("/ui/machines/m1", "Refund approved")
	require.NotContains(t, body, "stopped before its end")
}

// TestDecisionModelDownRetried: on SQLite with retries (markov serve's
// --retries), the run that failed after the decision is tried again with
// backoff, and the machine finishes with no restart and no manual step
// (#29 item 1, as a fleet does on PostgreSQL).
func TestDecisionModelDownRetried(t *testing.T) {
	g := &gate{}
	charter, err := charterWith(g.model())
	require.NoError(t, err)
	_, r := openWith(t, filepath.Join(t.TempDir(), "console.db"), durable.Config{Charter: charter, Retry: durable.Retry{Attempts: 5, Backoff: 10 * time.Millisecond}})
	s := newStack(t, console.Config{Runner: r, Charter: charter})
	id := s.park(t, "m1", 42)
	g.failNext(1)
	c := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + id
	status, loc, body := c.post(page, page+"/resume", url.Values{"_decision": {"true"}})
	require.Equal(t, http.StatusSeeOther, status, body)
	body = c.waitPage(loc, "Refund approved")
	require.NotContains(t, body, "10.0.0.7")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.Wait(ctx))
	final, err := r.Status(ctx, "m1")
	require.NoError(t, err)
	require.Equal(t, durable.StateDone, final.State)
}

// TestFleetDecisionModelDown: on a PostgreSQL fleet, the decision is
// committed with its job while the model is down; the job fails, the
// fleet retries it, and the machine finishes with no manual step.
func TestFleetDecisionModelDown(t *testing.T) {
	ctx := context.Background()
	st, _, _ := pgtest.Open(t)
	g := &gate{}
	charter, err := charterWith(g.model())
	require.NoError(t, err)
	f, err := fleet.New(fleet.Config{Store: st, Charter: charter, Workers: 2})
	require.NoError(t, err)
	require.NoError(t, f.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.Stop(sctx)
	})
	s := newStack(t, console.Config{Runner: f.Runner(), Acceptor: f, Fleet: f, Charter: charter})
	_, err = f.Runner().Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	_, err = f.Send(ctx, "m1", message.UserText("refund order 7"))
	require.NoError(t, err)
	var pending []store.Suspension
	require.Eventually(t, func() bool {
		pending, err = f.Runner().Pending(ctx, store.Filter{})
		return err == nil && len(pending) == 1
	}, 30*time.Second, 20*time.Millisecond)
	id := pending[0].ID

	g.failNext(1)
	c := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + id
	status, loc, body := c.post(page, page+"/resume", url.Values{"_decision": {"true"}})
	require.Equal(t, http.StatusSeeOther, status, body)
	_, body = c.get(loc)
	require.Contains(t, body, "Decision recorded")
	require.NotContains(t, body, "10.0.0.7")
	body = c.waitPage("/ui/machines/m1", "Refund approved")
	require.NotContains(t, body, "10.0.0.7")
	require.Eventually(t, func() bool { // the job ends after the save that shows the answer
		final, err := f.Status(ctx, "m1")
		return err == nil && final.State == durable.StateDone
	}, 30*time.Second, 20*time.Millisecond)
}

// TestErrorPageSaysNothingInternal: a page that fails shows the console's
// own error page, with a reference to the log and not the error.
func TestErrorPageSaysNothingInternal(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "console.db")})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: st, Charter: newCharter(t)})
	require.NoError(t, err)
	s := newStack(t, console.Config{Runner: r})
	s.park(t, "m1", 3)
	c := signedIn(t, s, "ada")
	require.NoError(t, st.Close()) // every read fails now
	status, body := c.get("/ui/machines/m1")
	require.Equal(t, http.StatusInternalServerError, status)
	require.Contains(t, body, "Something went wrong on our side (reference ")
	require.NotContains(t, body, "sql")
	require.Contains(t, body, "<main")
}

// TestDecidedRows: in the inbox, decided rows say what was decided and
// by whom, and neither count as waiting nor show a deadline; an expired
// row is not overdue (#29 item 8).
func TestDecidedRows(t *testing.T) {
	var shift atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	charter, err := charterAt(refundModel(), clock)
	require.NoError(t, err)
	r := openRunnerOn(t, filepath.Join(t.TempDir(), "console.db"), charter)
	s := newStack(t, console.Config{Runner: r, Charter: charter, Now: clock})
	ids := map[string]string{}
	for i, m := range []string{"approved", "declined", "cancelled", "failed", "expired"} {
		ids[m] = s.park(t, "m-"+m, i+1)
	}
	ada, grace := signedIn(t, s, "ada"), signedIn(t, s, "grace")
	decide := func(c *client, id, action string, form url.Values) {
		t.Helper()
		page := "/ui/suspensions/" + id
		status, _, body := c.post(page, page+"/"+action, form)
		require.Equal(t, http.StatusSeeOther, status, body)
	}
	decide(ada, ids["approved"], "resume", url.Values{"_decision": {"true"}})
	decide(grace, ids["declined"], "resume", url.Values{"_decision": {"false"}})
	decide(grace, ids["cancelled"], "cancel", url.Values{"reason": {"duplicate"}})
	decide(ada, ids["failed"], "error", url.Values{"message": {"no such order"}})
	shift.Store(int64(2 * time.Hour)) // past the deadline of the one left
	_, err = r.Sweep(context.Background(), 10)
	require.NoError(t, err)
	s.requireStatus(t, ids["expired"], store.StatusExpired)

	_, body := ada.get("/ui/?status=all")
	for word, by := range map[string]string{"approved": "ada", "declined": "grace", "cancelled": "grace", "failed with an error": "ada", "expired": ""} {
		key, _, _ := strings.Cut(word, " ")
		row := inboxRow(t, body, ids[key])
		require.Contains(t, row, `<td class="outcome"><span class="status `)
		require.Contains(t, row, ">"+word+"</span>")
		if by != "" {
			require.Contains(t, row, `<span class="by">by `+by+`</span>`)
		} else {
			require.NotContains(t, row, `class="by"`)
		}
		require.Contains(t, row, `<td class="deadline">—</td>`, "no deadline for a decided row")
		require.NotContains(t, row, "overdue")
		require.Contains(t, row, "asked ", "no time waiting")
	}
}

// inboxRow is the inbox's row of suspension id.
func inboxRow(t *testing.T, body, id string) string {
	t.Helper()
	start := strings.Index(body, `data-suspension="`+id+`"`)
	require.GreaterOrEqual(t, start, 0, "no row for %s", id)
	end := strings.Index(body[start:], "</tr>")
	require.Greater(t, end, 0)
	return body[start : start+end]
}
