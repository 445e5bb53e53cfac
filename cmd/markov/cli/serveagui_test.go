package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/resumehttp"
)

// TestServeAGUI: serve --agui mounts the AG-UI endpoint behind the API's
// signed requests: an unsigned request is refused 401, a signed one runs
// the refund charter to its approval interrupt; a CORS preflight from an
// allowed origin is answered without a signature.
func TestServeAGUI(t *testing.T) {
	c := &CLI{Charter: refundCharter(t)}
	c.SetDB(filepath.Join(t.TempDir(), "test.db"))
	db, err := c.Open(context.Background(), false)
	require.NoError(t, err)
	defer db.Close()
	cfg := &serveConfig{secret: []byte(childSecret), agui: aguiFlags{path: "/agui", node: refund.NodeName, origins: "https://app.example"}}
	require.NoError(t, cfg.agui.check("serve"))
	h, stop, err := c.serveHandler(cfg, db)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer stop()

	body := `{"threadId":"t1","runId":"r1","messages":[{"id":"m1","role":"user","content":` + quote(refund.CustomerRequest) + `}]}`
	resp, err := http.Post(srv.URL+"/agui", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/agui", strings.NewReader(body))
	require.NoError(t, err)
	resumehttp.SignRequest([]byte(childSecret), req, []byte(body), time.Now())
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var lastData string
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			lastData = d
		}
	}
	require.Contains(t, lastData, `"type":"RUN_FINISHED"`)
	require.Contains(t, lastData, `"outcome":{"type":"interrupt"`)

	pre, err := http.NewRequest(http.MethodOptions, srv.URL+"/agui", nil)
	require.NoError(t, err)
	pre.Header.Set("Origin", "https://app.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "content-type, x-markov-signature, x-markov-timestamp")
	resp, err = http.DefaultClient.Do(pre)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "https://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "content-type, x-markov-signature, x-markov-timestamp", resp.Header.Get("Access-Control-Allow-Headers"))

	require.Error(t, (&aguiFlags{path: "agui", node: "x"}).check("serve"), "a path starts with /")
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// TestServeAGUIConsoleSession: with --console beside --agui, a person
// signed in to the console drives the AG-UI endpoint from a page of the
// same origin with their session alone — no signature — and a request
// with their cookie from another origin is refused.
func TestServeAGUIConsoleSession(t *testing.T) {
	const consoleSecret = "the console secret for the test, 32+ bytes"
	c := &CLI{Charter: refundCharter(t), Getenv: func(k string) string {
		if k == "MARKOV_CONSOLE_SECRET" {
			return consoleSecret
		}
		return ""
	}}
	c.SetDB(filepath.Join(t.TempDir(), "test.db"))
	db, err := c.Open(context.Background(), false)
	require.NoError(t, err)
	defer db.Close()
	cfg := &serveConfig{secret: []byte(childSecret), agui: aguiFlags{path: "/agui", node: refund.NodeName},
		ui: consoleFlags{enabled: true, secretEnv: "MARKOV_CONSOLE_SECRET"}}
	h, stop, err := c.serveHandler(cfg, db)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer stop()

	// Sign in to the console, as a browser does.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(srv.URL + "/ui/login")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	require.NotNil(t, csrf)
	resp, err = browser.PostForm(srv.URL+"/ui/login", url.Values{"name": {"dana"}, "secret": {consoleSecret}, "csrf": {string(csrf[1])}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	run := func(origin string) *http.Response {
		t.Helper()
		body := `{"threadId":"t-` + strings.ReplaceAll(origin, "/", "") + `","runId":"r1","messages":[{"id":"m1","role":"user","content":` + quote(refund.CustomerRequest) + `}]}`
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/agui", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		resp, err := browser.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp = run("https://elsewhere.example")
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "the cookie from another origin's page")

	resp = run(srv.URL)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var lastData string
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			lastData = d
		}
	}
	require.Contains(t, lastData, `"outcome":{"type":"interrupt"`)
}
