package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/console"
)

// TestSessionOr: another endpoint on the console's origin lets a person
// signed in to the console through, with their identity; a request that
// rests on the session cookie and changes something must come from the
// console's origin; anyone else goes to the other authentication, or is
// refused. The session reaches the other endpoint only when its cookie
// path (Config.CookiePath) holds it.
func TestSessionOr(t *testing.T) {
	c, err := console.New(console.Config{Runner: openRunner(t, t.TempDir()+"/console.db"), Charter: newCharter(t), Secret: []byte(secret), CookiePath: "/"})
	require.NoError(t, err)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello " + c.Identity(r))) })
	signed := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Signed") != "yes" {
				http.Error(w, "unsigned", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	mux.Handle("/app", c.SessionOr(signed)(app))
	mux.Handle("/only", c.SessionOr(nil)(app))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := &stack{srv: srv}

	do := func(cl *client, method, path string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		hc := http.DefaultClient
		if cl != nil {
			hc = cl.http
		}
		res, err := hc.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		return res.StatusCode, strings.TrimSpace(readAll(t, res))
	}
	ada := signedIn(t, s, "ada")
	here := map[string]string{"Origin": srv.URL}

	status, body := do(ada, http.MethodGet, "/app", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "hello ada", body)
	status, body = do(ada, http.MethodPost, "/app", here)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "hello ada", body)

	for name, h := range map[string]map[string]string{"no origin": nil, "another origin": {"Origin": "https://evil.example"}, "a bad origin": {"Origin": "::"}} {
		status, _ = do(ada, http.MethodPost, "/app", h)
		require.Equal(t, http.StatusForbidden, status, name)
	}

	// Without a session: the other authentication decides, or nothing.
	status, _ = do(nil, http.MethodPost, "/app", here)
	require.Equal(t, http.StatusUnauthorized, status)
	status, body = do(nil, http.MethodPost, "/app", map[string]string{"X-Signed": "yes"})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "hello", body, "no person named")
	status, _ = do(nil, http.MethodGet, "/only", map[string]string{"X-Signed": "yes"})
	require.Equal(t, http.StatusUnauthorized, status)

	// The cookie path must hold the console.
	_, err = console.New(console.Config{Runner: openRunner(t, t.TempDir()+"/console.db"), Charter: newCharter(t), Secret: []byte(secret), CookiePath: "/api/"})
	require.ErrorIs(t, err, console.ErrInvalidConfig)
}
