package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	markova2a "github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/resumehttp"
)

// jsClientDir is the Node project of the official JavaScript A2A SDK
// (its package-lock.json pins @a2a-js/sdk; .ci/run installs it with npm
// ci).
var jsClientDir = filepath.Join("testdata", "jsclient")

// apiSecret signs the requests to the HTTP API of the JavaScript client's
// test.
var apiSecret = []byte("0123456789abcdef0123456789abcdef-a2a")

// jsRun is what script.mjs saw over one binding.
type jsRun struct {
	Hello  struct{ State, Answer string }
	Stream struct {
		Kinds       []string
		State       string
		Suspensions []markova2a.Suspension
	}
	StreamText struct{ Text, State string }
	Answered   struct{ State, Answer string }
	Order      struct {
		State string
		Bad   struct {
			State       string
			Suspensions []markova2a.Suspension
		}
		Good           struct{ State, Answer string }
		SameSuspension bool
	}
	Errors struct{ UnknownTask, FinishedTask string }
	Cancel struct{ State string }
	Auth   struct {
		State            string
		DecidedElsewhere bool
		Refused, First   string
		States           []string
		Final, Answer    string
	}
}

// TestJavaScriptClient drives the server with the official JavaScript
// SDK's client over each binding: send, stream, input-required → answer
// → completed, an invalid payload refused, unknown and finished tasks,
// cancel, and an auth-required task resolved over the signed HTTP API
// (resumehttp, as markov serve mounts it) followed with resubscribe on
// another server than the one that made the task.
func TestJavaScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	testkit.Require(t, err, "Node.js", "apt-get install nodejs npm, then cd a2a/testdata/jsclient && npm ci (or .ci/run)")
	_, err = os.Stat(filepath.Join(jsClientDir, "node_modules", "@a2a-js", "sdk", "package.json"))
	testkit.Require(t, err, "the JavaScript A2A SDK", "cd a2a/testdata/jsclient && npm ci (or .ci/run)")
	for _, binding := range []string{string(a2a.TransportProtocolJSONRPC), string(a2a.TransportProtocolHTTPJSON)} {
		t.Run(binding, func(t *testing.T) {
			f := newFixture(t)
			first := f.srv.URL
			f.start(t) // another server on the same database, as another process: it serves the resubscribe
			h, err := resumehttp.New(resumehttp.Config{Runner: f.runner, Acceptor: f.runner, Secret: apiSecret})
			require.NoError(t, err)
			api := httptest.NewServer(h)
			defer api.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "script.mjs", first, binding, f.srv.URL)
			cmd.Dir = jsClientDir
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			lines := bufio.NewScanner(stdout)
			lines.Buffer(nil, 1<<20)
			var last string
			for lines.Scan() {
				last = lines.Text()
				var step struct{ Resume string }
				if json.Unmarshal([]byte(last), &step) == nil && step.Resume != "" {
					// A person approves over the signed HTTP API (markov serve's).
					body := []byte(`{"payload":"approved"}`)
					req, err := http.NewRequest(http.MethodPost, api.URL+"/suspensions/"+step.Resume+"/resume", bytes.NewReader(body))
					require.NoError(t, err)
					req.Header.Set("Content-Type", "application/json")
					resumehttp.SignRequest(apiSecret, req, body, time.Now())
					resp, err := http.DefaultClient.Do(req)
					require.NoError(t, err)
					resp.Body.Close()
					require.Equal(t, http.StatusAccepted, resp.StatusCode)
					_, err = stdin.Write([]byte("resumed\n"))
					require.NoError(t, err)
				}
			}
			require.NoError(t, cmd.Wait(), "node script.mjs")
			t.Logf("%s", last)
			var r jsRun
			require.NoError(t, json.Unmarshal([]byte(last), &r), "%s", last)

			require.Equal(t, "TASK_STATE_COMPLETED", r.Hello.State)
			require.Equal(t, "You said: hello", r.Hello.Answer)

			require.Equal(t, "TASK_STATE_INPUT_REQUIRED", r.Stream.State)
			require.Subset(t, r.Stream.Kinds, []string{"task", "statusUpdate"})
			require.Len(t, r.Stream.Suspensions, 1)
			require.Equal(t, "favourite colour?", r.Stream.Suspensions[0].Reason)
			require.JSONEq(t, `{"type":"string","minLength":1}`, string(r.Stream.Suspensions[0].Schema))

			// The streamed deltas, then the final answer, replacing them.
			require.Equal(t, "You said: hiYou said: hi", r.StreamText.Text)
			require.Equal(t, "TASK_STATE_COMPLETED", r.StreamText.State)

			require.Equal(t, "TASK_STATE_COMPLETED", r.Answered.State)
			require.Equal(t, "Done: green", r.Answered.Answer)

			require.Equal(t, "TASK_STATE_INPUT_REQUIRED", r.Order.State)
			require.Equal(t, "TASK_STATE_INPUT_REQUIRED", r.Order.Bad.State)
			require.True(t, r.Order.SameSuspension, "the refused payload consumed the suspension")
			require.Contains(t, r.Order.Bad.Suspensions[0].Violation, "qty")
			require.Equal(t, "TASK_STATE_COMPLETED", r.Order.Good.State)
			require.Equal(t, `Done: {"qty":4}`, r.Order.Good.Answer)

			require.Contains(t, strings.ToLower(r.Errors.UnknownTask), "not found")
			require.Contains(t, r.Errors.FinishedTask, "terminal")

			require.Equal(t, "TASK_STATE_CANCELED", r.Cancel.State)

			require.Equal(t, "TASK_STATE_AUTH_REQUIRED", r.Auth.State)
			require.True(t, r.Auth.DecidedElsewhere)
			require.Contains(t, r.Auth.Refused, "decided elsewhere")
			require.Equal(t, "TASK_STATE_COMPLETED", r.Auth.States[len(r.Auth.States)-1])
			require.Equal(t, "TASK_STATE_COMPLETED", r.Auth.Final)
			require.Equal(t, "Done: approved", r.Auth.Answer)
		})
	}
}
