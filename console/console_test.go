package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/store"
)

func TestSignInRequired(t *testing.T) {
	s := newStack(t, console.Config{})
	c := newClient(t, s)
	status, _ := c.get("/ui/")
	require.Equal(t, http.StatusSeeOther, status)
	status, _, body := c.post("/ui/login", "/ui/login", url.Values{"name": {"ada"}, "secret": {"wrong"}})
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, "Wrong name or secret")
	c.signIn("ada")
	status, body = c.get("/ui/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "ada")
}

func TestCSRFRequired(t *testing.T) {
	s, id := parked(t, "m1", 42)
	c := signedIn(t, s, "ada")
	res, err := c.http.PostForm(s.srv.URL+"/ui/suspensions/"+id+"/resume", url.Values{"_decision": {"true"}, "csrf": {"forged"}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	s.requireStatus(t, id, store.StatusPending)
}

func TestIdentityHeader(t *testing.T) {
	s := newStack(t, console.Config{IdentityHeader: "X-Forwarded-User"})
	res, err := http.Get(s.srv.URL + "/ui/")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/ui/", nil)
	req.Header.Set("X-Forwarded-User", "grace@example.com")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body := readAll(t, res)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, body, "grace@example.com")
}

// TestDecideRecordsWho approves through the form without JavaScript: the
// machine resumes, the history names who decided, a second decision is a
// conflict.
func TestDecideRecordsWho(t *testing.T) {
	ctx := context.Background()
	s, id := parked(t, "m1", 42)
	c := signedIn(t, s, "ada")
	_, inbox := c.get("/ui/")
	require.Contains(t, inbox, "refund 4200 for order 42")
	require.Contains(t, inbox, "ada@example.com")

	page := "/ui/suspensions/" + id
	status, loc, _ := c.post(page, page+"/resume", url.Values{"_decision": {"true"}, "note": {"fine"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/machines/m1?decided="+id, loc)
	c.waitPage(loc, "Refund approved")

	m, _, err := s.runner.Load(ctx, "m1")
	require.NoError(t, err)
	var decided string
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.Kind == message.KindRecord && p.Name == "decided" {
				decided = string(p.Data)
			}
		}
	}
	require.JSONEq(t, `{"by":"ada","decision":"resumed","payload":{"approved":true,"note":"fine"}}`, decided)

	status, _, body := signedIn(t, s, "grace").post("/ui/machines/m1", page+"/cancel", url.Values{"reason": {"late"}})
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, body, "ada decided this suspension first")
}

func TestSchemaViolationLeavesPending(t *testing.T) {
	s, id := parked(t, "m1", 7)
	c := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + id
	status, _, body := c.post(page, page+"/resume", url.Values{"approved": {"on"}, "tags": {`["ok", 3]`}})
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Contains(t, body, `Not sent: <a href="#field-tags">tags[1]: expected string, got integer</a>`, "short, naming the field, linking to it")
	require.Contains(t, body, `aria-describedby="field-tags-desc field-tags-err" aria-invalid="true"`, "the field points at its error")
	require.Contains(t, body, `<p class="field-error" id="field-tags-err">tags: at [1]: expected string, got integer</p>`, "the error at the field")
	require.NotContains(t, body, "validating", "no validator dump")
	require.Contains(t, body, "[&#34;ok&#34;, 3]", "the posted value is shown again")
	s.requireStatus(t, id, store.StatusPending)
}

func TestInboxFilters(t *testing.T) {
	s := newStack(t, console.Config{})
	s.park(t, "m1", 1)
	s.park(t, "m2", 2)
	c := signedIn(t, s, "ada")
	_, body := c.get("/ui/?q=order+2")
	require.Contains(t, body, "order 2")
	require.NotContains(t, body, "order 1<")
	_, body = c.get("/ui/?tool=nothing")
	require.Contains(t, body, "Nothing here.")
	_, body = c.get("/ui/?node=desk&status=pending")
	require.Equal(t, 2, strings.Count(body, `class="row"`))
	_, body = c.get("/ui/")
	require.Less(t, strings.Index(body, "order 1<"), strings.Index(body, "order 2"), "the soonest deadline first")
}
