package cli

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
