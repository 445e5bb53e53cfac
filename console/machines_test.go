package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable/fleet"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/postgres/pgtest"
)

// machineStatus is the status the machines list shows for machine id.
func machineStatus(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`data-machine="` + regexp.QuoteMeta(id) + `">\s*<td>.*?</td>\s*<td data-label="Status"><span class="status (\w+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, "no row for %s", id)
	return m[1]
}

// TestMachinesList: the operators' list says what each machine is doing
// — waiting for a decision, finished, stalled after a failed run, new —
// finds machines by ID and node and filters by status; a stalled
// machine is retried and a waiting one has its waits cancelled, each
// only once confirmed, the cancellation in the operator's name (#29).
func TestMachinesList(t *testing.T) {
	ctx := context.Background()
	s, g, stalled := gated(t, "m-stalled", 1)
	waiting := s.park(t, "m-waiting", 2)
	done := s.park(t, "m-done", 3)
	_, err := s.runner.Create(ctx, "m-new", "desk", nil)
	require.NoError(t, err)
	c := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + done
	status, _, _ := c.post(page, page+"/resume", url.Values{"_decision": {"true"}})
	require.Equal(t, http.StatusSeeOther, status)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.runner.Wait(waitCtx)) // m-done's run ends before the model goes down
	g.failNext(1)
	page = "/ui/suspensions/" + stalled
	status, _, _ = c.post(page, page+"/resume", url.Values{"_decision": {"true"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.NoError(t, s.runner.Wait(waitCtx))

	_, body := c.get("/ui/machines")
	for id, want := range map[string]string{"m-stalled": "stalled", "m-waiting": "waiting", "m-done": "finished", "m-new": "new"} {
		require.Equal(t, want, machineStatus(t, body, id), id)
	}
	require.Contains(t, body, `<td data-label="Nodes">desk</td>`)

	_, body = c.get("/ui/machines?q=WAIT")
	require.Contains(t, body, `data-machine="m-waiting"`)
	require.Equal(t, 1, strings.Count(body, `class="machine"`), "search by ID")
	_, body = c.get("/ui/machines?q=desk&status=stalled")
	require.Contains(t, body, `data-machine="m-stalled"`)
	require.Equal(t, 1, strings.Count(body, `class="machine"`), "search by node, filter by status")
	_, body = c.get("/ui/machines?q=nothing-like-it")
	require.Contains(t, body, "No machines match.")

	_, body = c.get("/ui/machines/m-stalled")
	require.Contains(t, body, `action="/ui/machines/m-stalled/retry"`, "the machine page offers the retry too")

	// Retry: refused unconfirmed, nothing done; then the run goes on.
	status, _, body = c.post("/ui/machines", "/ui/machines/m-stalled/retry", url.Values{})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, "Tick the box to confirm: nothing was done to m-stalled.")
	status, loc, _ := c.post("/ui/machines", "/ui/machines/m-stalled/retry", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/machines/m-stalled?done=retry", loc)
	c.waitPage("/ui/machines/m-stalled", "Refund approved")

	// Cancel: the waits of m-waiting, in ada's name.
	status, _, _ = c.post("/ui/machines", "/ui/machines/m-waiting/cancel", url.Values{"confirm": {"yes"}, "reason": {"duplicate case"}})
	require.Equal(t, http.StatusSeeOther, status)
	s.requireStatus(t, waiting, store.StatusCancelled)
	_, body = c.get("/ui/?status=all")
	require.Contains(t, inboxRow(t, body, waiting), `<span class="by">by ada</span>`)
	status, _, body = c.post("/ui/machines", "/ui/machines/m-waiting/cancel", url.Values{"confirm": {"yes"}})
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, body, "waits for no decision")

	// Without the session's CSRF token, nothing.
	res, err := c.http.PostForm(c.base+"/ui/machines/m-new/retry", url.Values{"confirm": {"yes"}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
}

// TestMachinesPages: the list shows machinesPage machines a page, with
// links to the next and previous pages that keep the search.
func TestMachinesPages(t *testing.T) {
	s := newStack(t, console.Config{})
	for i := range 30 {
		_, err := s.runner.Create(context.Background(), fmt.Sprintf("m-%02d", i), "desk", nil)
		require.NoError(t, err)
	}
	c := signedIn(t, s, "ada")
	_, body := c.get("/ui/machines")
	require.Equal(t, 25, strings.Count(body, `class="machine"`))
	require.Contains(t, body, `href="?page=2" rel="next"`)
	require.NotContains(t, body, `data-machine="m-25"`)
	_, body = c.get("/ui/machines?page=2")
	require.Equal(t, 5, strings.Count(body, `class="machine"`))
	require.Contains(t, body, `data-machine="m-29"`)
	require.Contains(t, body, `href="?page=1" rel="prev"`)
	_, body = c.get("/ui/machines?q=m-2&status=new")
	require.Equal(t, 10, strings.Count(body, `class="machine"`))
}

// TestMachinesListFleet: on a PostgreSQL fleet, the list reads the
// fleet's statuses — a machine waiting for a decision, one whose input
// is queued for a worker — and filters by status.
func TestMachinesListFleet(t *testing.T) {
	ctx := context.Background()
	st, _, _ := pgtest.Open(t)
	f, err := fleet.New(fleet.Config{Store: st, Charter: newCharter(t), Workers: 2})
	require.NoError(t, err)
	s := newStack(t, console.Config{Runner: f.Runner(), Acceptor: f, Fleet: f})
	s.park(t, "m-waiting", 1)
	_, err = f.Runner().Create(ctx, "m-queued", "desk", nil)
	require.NoError(t, err)
	_, err = f.Send(ctx, "m-queued", message.UserText("refund order 7")) // no worker started: it stays queued
	require.NoError(t, err)
	c := signedIn(t, s, "ada")
	_, body := c.get("/ui/machines")
	require.Equal(t, "waiting", machineStatus(t, body, "m-waiting"))
	require.Equal(t, "queued", machineStatus(t, body, "m-queued"))
	_, body = c.get("/ui/machines?status=waiting")
	require.Equal(t, 1, strings.Count(body, `class="machine"`))
}

// FuzzMachinesQuery: any search, status and page in the machines list's
// query answers 200, never a panic or an error page.
func FuzzMachinesQuery(f *testing.F) {
	s := newStack(f, console.Config{})
	s.park(f, "m-waiting", 1)
	c := signedIn(f, s, "ada")
	f.Add("m-wait", "waiting", "1")
	f.Add("", "nonsense", "-5")
	f.Add("DESK", "", "99999999999999999999")
	f.Add("%00\n<script>", "parked", "2")
	f.Fuzz(func(t *testing.T, q, status, page string) {
		ct := *c // the client, reporting to this run
		ct.t = t
		code, body := ct.get("/ui/machines?" + url.Values{"q": {q}, "status": {status}, "page": {page}}.Encode())
		if code != http.StatusOK || !strings.Contains(body, `id="machines"`) {
			t.Fatalf("q=%q status=%q page=%q: %d", q, status, page, code)
		}
	})
}
