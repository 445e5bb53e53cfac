package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/webhook"
	"github.com/stretchr/testify/require"
)

type desk struct{}

// waitIn is the wait tool's input: the suspend ID to take, and the event
// that also wakes it (if any).
type waitIn struct {
	ID    string `json:"id"`
	Event string `json:"event,omitempty"`
}

// env is a durable runner whose machines wait in a tool for an outside
// answer, and a webhook handler in front of it.
type env struct {
	t      *testing.T
	runner *durable.Runner
	store  store.Store
	srv    *httptest.Server
	now    time.Time
}

// newRunner returns a runner on a fresh memstore: a machine's first turn
// calls the tool "wait", which suspends; once resumed, the model says
// "answer: <result>".
func newRunner(t *testing.T) (*durable.Runner, store.Store) {
	t.Helper()
	return newRunnerOn(t, memstore.New())
}

// newRunnerOn is newRunner on st.
func newRunnerOn(t *testing.T, st store.Store) (*durable.Runner, store.Store) {
	t.Helper()
	wait := node.NewTool("wait", "Wait for an outside answer.",
		func(ctx *node.ToolContext[desk], in waitIn) (string, error) {
			opts := []instance.SuspendOption{instance.WithID(in.ID)}
			if in.Event != "" {
				opts = append(opts, instance.WithEvent(in.Event))
			}
			return "", ctx.Suspend("waiting for "+in.ID, opts...)
		})
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{wait}})
	require.NoError(t, err)
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == message.Tool {
			return scripted.Text("answer: " + last.Parts[0].Text), nil
		}
		var in waitIn
		if err := json.Unmarshal([]byte(last.Text()), &in); err != nil {
			return scripted.Reply{}, err
		}
		return scripted.Tool("wait", in), nil
	})
	charter, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: st, Charter: charter})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Wait(context.Background()) })
	return r, st
}

// newEnv serves routes in front of a fresh runner, its clock fixed at
// env.now.
func newEnv(t *testing.T, routes ...webhook.Route) *env {
	t.Helper()
	return newEnvOn(t, memstore.New(), routes...)
}

// newEnvOn is newEnv on st.
func newEnvOn(t *testing.T, st store.Store, routes ...webhook.Route) *env {
	t.Helper()
	r, st := newRunnerOn(t, st)
	e := &env{t: t, runner: r, store: st, now: time.Now().Truncate(time.Second)}
	h, err := webhook.New(webhook.Config{Routes: routes, Acceptor: r, Signaler: r, Clock: func() time.Time { return e.now }})
	require.NoError(t, err)
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// wait starts machine id, which suspends as suspendID (woken by event
// too, if set).
func (e *env) wait(id, suspendID, event string) {
	e.t.Helper()
	ctx := context.Background()
	_, err := e.runner.Create(ctx, id, "desk", nil)
	require.NoError(e.t, err)
	in, _ := json.Marshal(waitIn{ID: suspendID, Event: event})
	for _, err := range e.runner.Run(ctx, id, machine.UserText(string(in))) {
		require.NoError(e.t, err)
	}
	require.Equal(e.t, store.StatusPending, e.status(suspendID))
}

// status is the status of suspendID in the index.
func (e *env) status(suspendID string) store.Status {
	e.t.Helper()
	s, err := e.runner.Suspension(context.Background(), suspendID)
	require.NoError(e.t, err)
	return s.Status
}

// said returns the last thing machine id said, once its runs are done.
func (e *env) said(id string) string {
	e.t.Helper()
	require.NoError(e.t, e.runner.Wait(context.Background()))
	st, err := e.runner.Status(context.Background(), id)
	require.NoError(e.t, err)
	return st.LastText
}

// answer is a delivery's answer.
type answer struct {
	status int
	body   map[string]any
	raw    string
	header http.Header
}

// post delivers body to path with headers.
func (e *env) post(path string, body []byte, headers map[string]string) answer {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	require.NoError(e.t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	a := answer{status: resp.StatusCode, raw: buf.String(), header: resp.Header}
	require.NoError(e.t, json.Unmarshal(buf.Bytes(), &a.body), buf.String())
	return a
}

// standard returns the Standard Webhooks headers of a delivery signed
// with secret at ts.
func standard(t *testing.T, secret, id string, ts time.Time, body []byte) map[string]string {
	t.Helper()
	key, err := webhook.ParseSecret(secret)
	require.NoError(t, err)
	return map[string]string{webhook.HeaderID: id, webhook.HeaderTimestamp: strconv.FormatInt(ts.Unix(), 10),
		webhook.HeaderSignature: webhook.Sign(key, id, ts, body)}
}

// swDir holds the Standard Webhooks reference library's package.
const swDir = "testdata/sw"

// sw runs one request through the reference library (testdata/sw/sw.mjs),
// skipping the test (failing it in CI) without Node or the library.
func sw(t *testing.T, req any) map[string]any {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	testkit.Require(t, err, "Node.js", "apt-get install nodejs npm, then cd webhook/testdata/sw && npm ci (or .ci/run)")
	_, err = os.Stat(filepath.Join(swDir, "node_modules", "standardwebhooks", "package.json"))
	testkit.Require(t, err, "the standardwebhooks library", "cd webhook/testdata/sw && npm ci (or .ci/run)")
	in, err := json.Marshal(req)
	require.NoError(t, err)
	cmd := exec.Command(nodeBin, "sw.mjs")
	cmd.Dir = swDir
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	require.NoError(t, err, "node sw.mjs: %s", fmt.Sprint(err))
	var res map[string]any
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	return res
}
