package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/store"
)

// The console's client at the test's OpenID provider.
const (
	oidcClientID     = "markov-console"
	oidcClientSecret = "console-oidc-client-secret-0123456789"
)

// idp is the OpenID provider of a test: oidc-provider, in a Node
// process (testdata/oidc/provider.mjs), whose people are ada (group
// managers) and grace (group support).
type idp struct {
	issuer string
}

// startIDP starts the provider with the console's client, whose callback
// and post-logout URLs are those of a console at base.
func startIDP(t *testing.T, base string) idp {
	t.Helper()
	line := testkit.Node(t, filepath.Join("testdata", "oidc"), "provider.mjs", "oidc-provider",
		"OIDC_CLIENT_ID="+oidcClientID, "OIDC_CLIENT_SECRET="+oidcClientSecret,
		"OIDC_REDIRECT_URI="+base+"/ui/oidc/callback", "OIDC_POST_LOGOUT_URI="+base+"/ui/login")
	var ready struct{ Issuer string }
	require.NoError(t, json.Unmarshal([]byte(line), &ready), line)
	return idp{issuer: ready.Issuer}
}

// tamper makes the provider's next ID token carry claims, signed with a
// key it does not publish when foreignKey is set.
func (p idp) tamper(t *testing.T, claims map[string]any, foreignKey bool) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"claims": claims, "foreignKey": foreignKey})
	require.NoError(t, err)
	res, err := http.Post(p.issuer+"/test/tamper", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusNoContent, res.StatusCode)
}

// oidcStack is a console that signs people in with a provider started
// for it, over a runner of the refund charter whose approvals only the
// group managers may decide.
func oidcStack(t *testing.T) (*stack, idp) {
	t.Helper()
	charter := governedCharter(t, instance.Policy{Groups: []string{"managers"}})
	path := filepath.Join(t.TempDir(), "console.db")
	r := openRunnerOn(t, path, charter)
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	base := "http://" + srv.Listener.Addr().String()
	p := startIDP(t, base)
	c, err := console.New(console.Config{Runner: r, Charter: charter, OIDC: &console.OIDC{
		IssuerURL: p.issuer, ClientID: oidcClientID, ClientSecret: oidcClientSecret,
		RedirectURL: base + "/ui/oidc/callback", Scopes: []string{"groups"},
		PostLogoutRedirectURL: base + "/ui/login",
	}})
	require.NoError(t, err)
	mux.Handle("/ui/", c)
	srv.Start()
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return &stack{path: path, runner: r, srv: srv}, p
}

// signInWithIDP signs name in through the provider's own login and
// consent pages, starting at the console page at path.
func signInWithIDP(s *stack, path, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(s.srv.URL+path),
		chromedp.Click(css(`a[href*="oidc/start"]`)),
		chromedp.SendKeys(css(`input[name=login]`), name),
		chromedp.SendKeys(css(`input[name=password]`), "any password"),
		chromedp.Submit(css(`input[name=password]`)),
		// The provider's consent page.
		chromedp.Click(css(`input[name=prompt][value=consent] ~ button[type=submit]`)),
		chromedp.WaitVisible(css(`#who`)),
	)
}

// location is the tab's address.
func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	return loc
}

// TestBrowserOIDCGroupsDecide: people sign in through a real OpenID
// provider's login and consent pages, from a deep link they come back
// to; the ID token's groups claim decides what they may approve: grace
// (support) is refused with 403 and nothing changes, ada (managers)
// approves. Signing out goes through the provider's sign-out.
func TestBrowserOIDCGroupsDecide(t *testing.T) {
	ada, root := browser(t, true)
	grace := otherBrowser(t, root)
	s, _ := oidcStack(t)
	id := s.park(t, "m1", 7)
	page := "/ui/suspensions/" + id

	require.NoError(t, chromedp.Do(grace, signInWithIDP(s, page, "grace")))
	require.Equal(t, "grace", text(t, grace, `#who`))
	require.Equal(t, s.srv.URL+page, location(t, grace), "the deep link survives the sign-in")
	require.NoError(t, chromedp.Do(grace, chromedp.Click(css(`button.approve`))))
	require.Contains(t, text(t, grace, `.conflict`), "You may not decide this suspension")
	s.requireStatus(t, id, store.StatusPending)

	require.NoError(t, chromedp.Do(ada, signInWithIDP(s, page, "ada")))
	require.Equal(t, s.srv.URL+page, location(t, ada))
	require.NoError(t, chromedp.Do(ada, chromedp.Click(css(`button.approve`))))
	require.Contains(t, text(t, ada, `#answer`), "Refund approved")
	s.requireStatus(t, id, store.StatusResolved)

	// Sign out: the provider asks, then sends the browser back to the
	// console's sign-in page; the console's pages ask for a sign-in again.
	require.NoError(t, chromedp.Do(ada,
		chromedp.Click(css(`form.who button`)),
		chromedp.Click(css(`button[name=logout]`)),
		chromedp.WaitVisible(css(`a[href*="oidc/start"]`)),
		chromedp.Navigate(s.srv.URL+page),
		chromedp.WaitVisible(css(`a[href*="oidc/start"]`)),
	))
}

var (
	formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)
	promptRe   = regexp.MustCompile(`name="prompt" value="([a-z]+)"`)
)

// idpCallback walks c through the provider's login and consent pages as
// name, from the console's start of a sign-in going next, and returns
// the callback URL the provider sends the browser to, without calling
// it.
func idpCallback(t *testing.T, c *client, next string) func(name string) string {
	t.Helper()
	return func(name string) string {
		t.Helper()
		res, err := c.http.Get(c.base + "/ui/oidc/start?" + url.Values{"next": {next}}.Encode())
		require.NoError(t, err)
		for range 10 {
			body := readAll(t, res)
			require.NoError(t, res.Body.Close())
			at := res.Request.URL
			switch {
			case res.StatusCode >= 300 && res.StatusCode < 400:
				loc, err := at.Parse(res.Header.Get("Location"))
				require.NoError(t, err)
				if strings.HasPrefix(loc.String(), c.base+"/ui/oidc/callback") {
					return loc.String()
				}
				res, err = c.http.Get(loc.String())
				require.NoError(t, err)
			case res.StatusCode == http.StatusOK:
				action, prompt := formAction.FindStringSubmatch(body), promptRe.FindStringSubmatch(body)
				require.True(t, action != nil && prompt != nil, "no form on the provider's page:\n%s", body)
				to, err := at.Parse(html.UnescapeString(action[1]))
				require.NoError(t, err)
				form := url.Values{"prompt": {prompt[1]}}
				if prompt[1] == "login" {
					form.Set("login", name)
					form.Set("password", "any password")
				}
				res, err = c.http.PostForm(to.String(), form)
				require.NoError(t, err)
			default:
				t.Fatalf("the provider answered %d at %s:\n%s", res.StatusCode, at, body)
			}
		}
		t.Fatal("the provider never sent the browser back")
		return ""
	}
}

// withQuery is u with key set to value in its query.
func withQuery(t *testing.T, u, key, value string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	q := p.Query()
	q.Set(key, value)
	p.RawQuery = q.Encode()
	return p.String()
}

// callback calls the console's callback at u; it returns the status,
// the Location and the body.
func (c *client) callback(u string) (int, string, string) {
	c.t.Helper()
	res, err := c.http.Get(u)
	require.NoError(c.t, err)
	defer res.Body.Close()
	return res.StatusCode, res.Header.Get("Location"), readAll(c.t, res)
}

// requireSignedOut requires c to have no session: the inbox sends it to
// sign in.
func (c *client) requireSignedOut() {
	c.t.Helper()
	status, _ := c.get("/ui/")
	require.Equal(c.t, http.StatusSeeOther, status, "a refused sign-in made a session")
}

// manyGroups are more groups than a session cookie holds.
var manyGroups = func() []string {
	g := make([]string, 400)
	for i := range g {
		g[i] = fmt.Sprintf("group-%03d", i)
	}
	return g
}()

// TestOIDCRefusals: a callback with another state, a code replayed (in
// the same browser or another's sign-in), an ID token whose nonce,
// issuer, audience or signature is not the sign-in's, groups too many
// for a cookie, or the provider's
// own refusal, is refused with 401 and a message naming what was wrong;
// no session is made. A good sign-in's groups go with its decisions: a
// person outside the policy's group is refused with 403.
func TestOIDCRefusals(t *testing.T) {
	s, p := oidcStack(t)
	id := s.park(t, "m1", 7)
	page := "/ui/suspensions/" + id

	refused := func(c *client, u, want string) {
		t.Helper()
		status, _, body := c.callback(u)
		require.Equal(t, http.StatusUnauthorized, status, "%s", body)
		require.Contains(t, html.UnescapeString(body), want)
		c.requireSignedOut()
	}

	c := newClient(t, s)
	_, login := c.get("/ui/login?next=" + url.QueryEscape(page))
	require.Contains(t, strings.ToLower(login), strings.ToLower(`href="/ui/oidc/start?next=`+url.QueryEscape(page)+`"`))
	require.NotContains(t, login, `name="secret"`, "without a Secret there is no secret to sign in with")
	refused(c, withQuery(t, idpCallback(t, c, page)("ada"), "state", "forged"), "Sign-in refused: state does not match this browser")

	for _, tc := range []struct {
		name    string
		claims  map[string]any
		foreign bool
		want    string
	}{
		{"nonce", map[string]any{"nonce": "another"}, false, "nonce does not match"},
		{"issuer", map[string]any{"iss": "http://issuer.invalid"}, false, "id token issued by a different provider"},
		{"audience", map[string]any{"aud": "another-client"}, false, "expected audience"},
		{"signature", nil, true, "failed to verify signature"},
		{"groups", map[string]any{"groups": manyGroups}, false, `claim "groups" holds too many groups (400)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, s)
			u := idpCallback(t, c, page)("ada")
			p.tamper(t, tc.claims, tc.foreign)
			refused(c, u, tc.want)
		})
	}

	c = newClient(t, s)
	refused(c, withQuery(t, withQuery(t, idpCallback(t, c, page)("ada"), "error", "access_denied"), "code", ""), "the provider refused: access_denied")

	// A good sign-in, then its code replayed: in the same browser (its
	// sign-in is over) and in another browser's sign-in (the provider
	// will not exchange a used code, nor one for another PKCE verifier).
	victim := newClient(t, s)
	u := idpCallback(t, victim, page)("grace")
	status, loc, _ := victim.callback(u)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, page, loc, "the deep link survives the sign-in")
	refused(newClient(t, s), u, "no sign-in is in progress in this browser")
	attacker := newClient(t, s)
	res, err := attacker.http.Get(s.srv.URL + "/ui/oidc/start")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	auth, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	refused(attacker, withQuery(t, u, "state", auth.Query().Get("state")), "the provider would not exchange the code")

	// grace (support) signed in; the policy wants managers.
	_, body := victim.get(page)
	digest := regexp.MustCompile(`name="digest" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, digest)
	status, _, body = victim.post(page, page+"/resume", url.Values{"_decision": {"true"}, "digest": {digest[1]}})
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "You may not decide this suspension")
	s.requireStatus(t, id, store.StatusPending)
}

// TestOIDCConfigRefused: an OIDC config without its issuer, client or
// callback, a callback the console does not serve, or an issuer whose
// discovery fails is refused with ErrInvalidConfig naming the field.
func TestOIDCConfigRefused(t *testing.T) {
	charter := newCharter(t)
	r := openRunnerOn(t, filepath.Join(t.TempDir(), "console.db"), charter)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, tc := range []struct {
		oidc console.OIDC
		want string
	}{
		{console.OIDC{ClientID: "c", RedirectURL: "https://h/ui/oidc/callback"}, "IssuerURL, ClientID and RedirectURL are required"},
		{console.OIDC{IssuerURL: gone.URL, RedirectURL: "https://h/ui/oidc/callback"}, "IssuerURL, ClientID and RedirectURL are required"},
		{console.OIDC{IssuerURL: gone.URL, ClientID: "c", RedirectURL: "https://h/ui/callback"}, "OIDC.RedirectURL"},
		{console.OIDC{IssuerURL: gone.URL, ClientID: "c", RedirectURL: "https://h/ui/oidc/callback"}, "OIDC.IssuerURL"},
	} {
		_, err := console.New(console.Config{Runner: r, Charter: charter, OIDC: &tc.oidc})
		require.ErrorIs(t, err, console.ErrInvalidConfig)
		require.ErrorContains(t, err, tc.want)
	}
}
