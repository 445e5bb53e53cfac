package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/store"
)

// TestDeepLinkSignIn: a page opened without a session sends the person to
// sign in and, once signed in, back to it; a return path that leaves the
// console goes to the inbox (#29 item 6).
func TestDeepLinkSignIn(t *testing.T) {
	s, id := parked(t, "m1", 4)
	c := newClient(t, s)
	status, _ := c.get("/ui/suspensions/" + id + "?x=1")
	require.Equal(t, http.StatusSeeOther, status)
	res, err := c.http.Get(s.srv.URL + "/ui/suspensions/" + id + "?x=1")
	require.NoError(t, err)
	res.Body.Close()
	loc := res.Header.Get("Location")
	require.Equal(t, "/ui/login?next="+url.QueryEscape("/ui/suspensions/"+id+"?x=1"), loc)
	_, body := c.get(loc)
	require.Contains(t, body, `name="next" value="/ui/suspensions/`+id+`?x=1"`)

	status, to, _ := c.post(loc, "/ui/login", url.Values{"name": {"ada"}, "secret": {secret}, "next": {"/ui/suspensions/" + id + "?x=1"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/ui/suspensions/"+id+"?x=1", to)

	for _, next := range []string{"//evil.example/ui/", "https://evil.example/ui/", "/elsewhere", "/ui/login", "/ui/\\evil"} {
		status, to, _ := newClient(t, s).post("/ui/login", "/ui/login", url.Values{"name": {"ada"}, "secret": {secret}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, status)
		require.Equal(t, "/ui/", to, next)
	}
}

// TestExpiredSessionKeepsForm: a decision posted once the session ended
// decides nothing; the sign-in page says so and returns to the decision's
// page with the form as the person filled it in.
func TestExpiredSessionKeepsForm(t *testing.T) {
	var shift atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	s := newStack(t, console.Config{Now: clock, SessionTTL: time.Hour})
	id := s.park(t, "m1", 4)
	c := signedIn(t, s, "ada")
	page := "/ui/suspensions/" + id
	_, form := c.get(page)
	csrf := csrfRe.FindStringSubmatch(form)[1]
	shift.Store(int64(2 * time.Hour))

	res, err := c.http.PostForm(s.srv.URL+page+"/resume", url.Values{"csrf": {csrf}, "_decision": {"true"}, "note": {"goodwill"}})
	require.NoError(t, err)
	body := readAll(t, res)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Contains(t, body, "Your session ended, and your decision was not sent.")
	s.requireStatus(t, id, store.StatusPending)
	m := regexpNext.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	next := htmlUnescape(m[1])

	status, to, _ := c.post("/ui/login", "/ui/login", url.Values{"name": {"ada"}, "secret": {secret}, "next": {next}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, next, to)
	_, body = c.get(to)
	require.Contains(t, body, `name="note" value="goodwill"`)
	require.Contains(t, body, "What you filled in is back; nothing was decided yet.")
	s.requireStatus(t, id, store.StatusPending)
}

// TestBrowserSessionEnded: a live page whose session ends says that it
// stopped updating, with a link to sign in again that comes back.
func TestBrowserSessionEnded(t *testing.T) {
	ctx, _ := browser(t, true)
	var shift atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	s := newStack(t, console.Config{Now: clock, SessionTTL: time.Hour})
	s.park(t, "m1", 1)
	require.NoError(t, chromedp.Do(ctx,
		signInAs(s, "ada"),
		chromedp.WaitVisible(css(`body[data-following="1"]`)),
	))
	shift.Store(int64(2 * time.Hour))
	s.park(t, "m2", 2) // the inbox refreshes, and finds the session ended
	require.Contains(t, text(t, ctx, `#stopped`), "Your session ended: this page stopped updating.")
	href, err := chromedp.Run(ctx, chromedp.AttributeValue(css(`#stopped a`), "href"))
	require.NoError(t, err)
	require.Equal(t, "/ui/login?next=%2Fui%2F", href.Value)
}

var regexpNext = regexp.MustCompile(`name="next" value="([^"]*)"`)

func htmlUnescape(s string) string { return html.UnescapeString(s) }
