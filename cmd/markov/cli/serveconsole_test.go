package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/internal/testkit"
)

// serve --console with --console-oidc-issuer signs people in with the
// OpenID provider (oidc-provider, started here): the sign-in page offers
// it, and a sign-in goes to the provider's authorization endpoint with
// the flags' client, callback and scopes, and PKCE. An issuer without a
// client ID is refused, naming the flags.
func TestServeConsoleOIDC(t *testing.T) {
	c := &CLI{Charter: refundCharter(t), Getenv: func(k string) string {
		return map[string]string{"MARKOV_CONSOLE_OIDC_SECRET": "cli-oidc-client-secret-0123456789"}[k]
	}}
	c.SetDB(filepath.Join(t.TempDir(), "test.db"))
	db, err := c.Open(context.Background(), false)
	require.NoError(t, err)
	defer db.Close()

	_, _, err = c.serveHandler(&serveConfig{secret: []byte(childSecret), ui: consoleFlags{enabled: true, oidc: oidcFlags{issuer: "http://127.0.0.1:1"}}}, db)
	require.ErrorContains(t, err, "--console-oidc-issuer needs --console-oidc-client-id and --console-oidc-redirect-url")

	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	base := "http://" + srv.Listener.Addr().String()
	line := testkit.Node(t, filepath.Join("..", "..", "..", "console", "testdata", "oidc"), "provider.mjs", "oidc-provider",
		"OIDC_CLIENT_ID=markov", "OIDC_CLIENT_SECRET=cli-oidc-client-secret-0123456789",
		"OIDC_REDIRECT_URI="+base+"/ui/oidc/callback", "OIDC_POST_LOGOUT_URI="+base+"/ui/login")
	var ready struct{ Issuer string }
	require.NoError(t, json.Unmarshal([]byte(line), &ready), line)
	flags := oidcFlags{issuer: ready.Issuer, clientID: "markov", secretEnv: "MARKOV_CONSOLE_OIDC_SECRET",
		redirect: base + "/ui/oidc/callback", scopes: "groups, profile", subject: "sub", groups: "groups"}
	h, _, err := c.serveHandler(&serveConfig{secret: []byte(childSecret), ui: consoleFlags{enabled: true, oidc: flags}}, db)
	require.NoError(t, err)
	mux.Handle("/", h)
	srv.Start()
	defer srv.Close()

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(base + "/ui/oidc/start?next=/ui/machines")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	auth, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	q := auth.Query()
	require.Equal(t, ready.Issuer+"/auth", auth.Scheme+"://"+auth.Host+auth.Path)
	require.Equal(t, "markov", q.Get("client_id"))
	require.Equal(t, base+"/ui/oidc/callback", q.Get("redirect_uri"))
	require.Equal(t, "openid groups profile", q.Get("scope"))
	require.Equal(t, "S256", q.Get("code_challenge_method"))

	// The provider takes the request: its login page, not an error.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	res, err = (&http.Client{Jar: jar}).Get(auth.String())
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Request.URL.Path, "/interaction/")
}
