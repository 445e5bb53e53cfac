package agui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/agui"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/resumehttp"
)

// clientDir is the Node project of the official AG-UI client (its
// package-lock.json pins @ag-ui/client; .ci/run installs it with npm ci).
var clientDir = filepath.Join("testdata", "client")

// apiSecret signs the requests of the TypeScript client.
const apiSecret = "an-AG-UI-test-secret-of-32-bytes-at-least"

// tsRun is what script.mjs saw.
type tsRun struct {
	Interrupt struct {
		Finished struct {
			Outcome    string           `json:"outcome"`
			Interrupts []map[string]any `json:"interrupts"`
		} `json:"finished"`
		Results []map[string]any `json:"results"`
		Pending []map[string]any `json:"pending"`
	} `json:"interrupt"`
	Bad struct {
		Types  []string `json:"types"`
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
		Thrown string `json:"thrown"`
	} `json:"bad"`
	Good struct {
		Finished struct {
			Outcome string `json:"outcome"`
		} `json:"finished"`
		Results []map[string]any `json:"results"`
		Text    string           `json:"text"`
		State   agui.State       `json:"state"`
	} `json:"good"`
	Reconnect struct {
		FirstPart string   `json:"firstPart"`
		IDAtAbort string   `json:"idAtAbort"`
		Types     []string `json:"types"`
		Finished  struct {
			Outcome string `json:"outcome"`
		} `json:"finished"`
		Text string `json:"text"`
	} `json:"reconnect"`
}

// TestTypeScriptClient drives the endpoint, behind the HTTP API's signed
// requests (resumehttp.Handler.Protect), with the official client
// @ag-ui/client 1.0.0: a run to an interrupt, a payload the schema
// refuses (RUN_ERROR invalid_payload), a good answer (the result and the
// state), and a run it leaves mid-stream and reconnects to (the rest of
// the run, up to RUN_FINISHED).
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	testkit.Require(t, err, "Node.js", "apt-get install nodejs npm, then cd agui/testdata/client && npm ci (or .ci/run)")
	_, err = os.Stat(filepath.Join(clientDir, "node_modules", "@ag-ui", "client", "package.json"))
	testkit.Require(t, err, "the AG-UI TypeScript client", "cd agui/testdata/client && npm ci (or .ci/run)")

	f := newFixture(t)
	api, err := resumehttp.New(resumehttp.Config{Runner: f.runner, Secret: []byte(apiSecret)})
	require.NoError(t, err)
	h, err := agui.New(agui.Config{Runner: f.runner, Node: "desk", Auth: api.Protect})
	require.NoError(t, err)
	var once sync.Once
	mux := http.NewServeMux()
	mux.Handle("/agui", h)
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(f.model.release) })
	})
	srv := serve(t, h, mux)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "script.mjs", srv.URL+"/agui", apiSecret, srv.URL+"/release")
	cmd.Dir = clientDir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "node script.mjs: %s", stdout)
	t.Logf("%s", stdout)
	var r tsRun
	require.NoError(t, json.Unmarshal(stdout, &r), "%s", stdout)

	in := r.Interrupt
	require.Equal(t, "interrupt", in.Finished.Outcome)
	require.Len(t, in.Finished.Interrupts, 1)
	require.Equal(t, "refund of order 42 needs a manager", in.Finished.Interrupts[0]["message"])
	require.Equal(t, "approve-42", in.Finished.Interrupts[0]["toolCallId"])
	require.Contains(t, in.Finished.Interrupts[0], "responseSchema")
	require.Equal(t, in.Finished.Interrupts[0]["id"], in.Pending[0]["id"], "the client holds the interrupt as pending")
	require.Equal(t, "order 42: shoes, 40 EUR", in.Results[0]["content"])

	require.Len(t, r.Bad.Errors, 1, "types %v, thrown %q", r.Bad.Types, r.Bad.Thrown)
	require.Equal(t, "invalid_payload", r.Bad.Errors[0].Code)
	require.Equal(t, "agui: resume payload refused: "+in.Pending[0]["id"].(string)+": approved: expected boolean, got string", r.Bad.Errors[0].Message)

	require.Equal(t, "success", r.Good.Finished.Outcome)
	require.Equal(t, "Done: order 42: shoes, 40 EUR; order 42 refunded, approved by ts-e2e", r.Good.Text)
	require.Equal(t, "approve-42", r.Good.Results[0]["toolCallId"])
	require.Len(t, r.Good.State.Instances, 1)
	for _, st := range r.Good.State.Instances {
		require.Equal(t, map[string]any{"refunds": 1.0}, st.State, "the client applied the state delta")
	}

	require.NotEmpty(t, r.Reconnect.FirstPart)
	require.True(t, strings.HasPrefix(slowText, r.Reconnect.FirstPart))
	require.NotEmpty(t, r.Reconnect.IDAtAbort)
	require.Equal(t, "success", r.Reconnect.Finished.Outcome)
	require.Equal(t, "RUN_STARTED", r.Reconnect.Types[0])
	require.Equal(t, slowText, r.Reconnect.Text)
}
