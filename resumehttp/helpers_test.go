package resumehttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

var secret = []byte("0123456789abcdef-0123456789abcdef-test-secret")

type counter struct {
	Count int `json:"count"`
}

type askIn struct {
	What string `json:"what"`
}

// verdict is the payload of the typed tool ask_typed.
type verdict struct {
	Approved bool `json:"approved"`
}

type bumpIn struct {
	By int `json:"by" jsonschema:"how much to add"`
}

// deskModel asks a human about every user message ("soon: …" with a
// one-minute deadline, "typed: …" for a verdict) and, once the tool result is there, says
// "result: <result text>" (" (error)" appended for an error result).
func deskModel() *scripted.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		for _, p := range last.Parts {
			if p.Kind == message.KindToolResult {
				s := "result: " + p.Text
				if p.IsError {
					s += " (error)"
				}
				return scripted.Text(s), nil
			}
		}
		text := last.Text()
		if strings.HasPrefix(text, "soon:") {
			return scripted.Tool("ask_soon", askIn{What: text}), nil
		}
		if strings.HasPrefix(text, "typed:") {
			return scripted.Tool("ask_typed", askIn{What: text}), nil
		}
		return scripted.Tool("ask", askIn{What: text}), nil
	})
}

// deskCharter has a node "desk" with three asking tools (ask_typed takes
// a verdict on resume) and two commands: bump (adds to the count, returns
// it) and hold (suspends), then the extra commands.
func deskCharter(t testing.TB, model llm.Model, now func() time.Time, extra ...command.Command[counter]) *machine.Charter {
	t.Helper()
	ask := node.NewTool("ask", "ask a human", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("asking about " + in.What)
	})
	askSoon := node.NewTool("ask_soon", "ask a human, who has a minute", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("asking quickly about "+in.What, instance.WithTimeout(time.Minute))
	})
	askTyped := node.NewTool("ask_typed", "ask a human for a verdict", func(ctx *node.ToolContext[counter], in askIn) (string, error) {
		return "", ctx.Suspend("asking for a verdict on " + in.What)
	}, node.ResumeWith[verdict]())
	bump := command.New("bump", "Add to the count.", func(ctx *command.Context[counter], in bumpIn) (int, error) {
		if err := ctx.Update(func(c *counter) { c.Count += in.By }); err != nil {
			return 0, err
		}
		return ctx.State().Count, nil
	})
	hold := command.New("hold", "Wait for a person.", func(ctx *command.Context[counter], _ struct{}) (int, error) {
		return 0, ctx.Suspend("held")
	})
	desk, err := node.New("desk", node.Config[counter]{
		Tools:    []node.Tool[counter]{ask, askSoon, askTyped},
		Commands: append([]command.Command[counter]{bump, hold}, extra...),
		Validate: func(c counter) error {
			if c.Count > 100 {
				return errTooMuch
			}
			return nil
		},
	})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}, Clock: now})
	require.NoError(t, err)
	return c
}

var errTooMuch = stringError("count above 100")

type stringError string

func (e stringError) Error() string { return string(e) }

// env is a real stack: a durable runner over a store, the handler, and a
// real listener.
type env struct {
	runner  *durable.Runner
	handler *resumehttp.Handler
	model   *scripted.Model
	clock   *testkit.Clock
	srv     *httptest.Server
	logs    *syncBuffer
}

type syncBuffer = testkit.SyncBuffer

func newEnv(t testing.TB, st store.Store) *env {
	t.Helper()
	return newEnvWith(t, st, nil)
}

// newEnvWith is newEnv with the handler's config adjusted by tune (if not
// nil) and the extra commands on the desk node.
func newEnvWith(t testing.TB, st store.Store, tune func(*resumehttp.Config), extra ...command.Command[counter]) *env {
	t.Helper()
	e := &env{model: deskModel(), clock: testkit.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)), logs: &syncBuffer{}}
	if m, ok := st.(*memstore.Store); ok {
		m.Now = e.clock.Now // the replay guard's clock is the store's
	}
	r, err := durable.New(durable.Config{Store: st, Charter: deskCharter(t, e.model, e.clock.Now, extra...)})
	require.NoError(t, err)
	e.runner = r
	e.listen(t, resumehttp.Config{Runner: r, Secret: secret, Clock: e.clock.Now}, tune)
	return e
}

// listen serves the handler of cfg, adjusted by tune (if not nil) and
// logging to e.logs, on a real listener.
func (e *env) listen(t testing.TB, cfg resumehttp.Config, tune func(*resumehttp.Config)) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if tune != nil {
		tune(&cfg)
	}
	h, err := resumehttp.New(cfg)
	require.NoError(t, err)
	e.handler = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
}

func memEnv(t testing.TB) *env {
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	return newEnv(t, st)
}

func sqliteEnv(t testing.TB) *env {
	return newEnv(t, sqlitetest.Open(t, sqlitetest.Path(t)))
}

// forEachEnv runs test as a subtest on an env over each kind of store:
// memstore and SQLite.
func forEachEnv(t *testing.T, test func(t *testing.T, e *env)) {
	for name, newEnv := range map[string]func(testing.TB) *env{"memstore": memEnv, "sqlite": sqliteEnv} {
		t.Run(name, func(t *testing.T) { test(t, newEnv(t)) })
	}
}

// start creates a machine and runs it with text until its tool suspends.
func (e *env) start(t testing.TB, text string) (machineID, suspendID string) {
	t.Helper()
	ctx := context.Background()
	id, err := e.runner.Create(ctx, "", "desk", nil)
	require.NoError(t, err)
	var last machine.Step
	for st, err := range e.runner.Run(ctx, id, machine.UserText(text)) {
		require.NoError(t, err)
		last = st
	}
	require.True(t, last.NeedsResume())
	require.Len(t, last.Suspensions, 1)
	return id, last.Suspensions[0].SuspendID
}

// create makes a machine that has not run.
func (e *env) create(t testing.TB) string {
	t.Helper()
	id, err := e.runner.Create(context.Background(), "", "desk", nil)
	require.NoError(t, err)
	return id
}

// fingerprint is what a failed request must leave untouched.
type fingerprint struct {
	Revision int64
	History  int
	Pending  []store.Suspension
}

func (e *env) fingerprint(t testing.TB, machineID string) fingerprint {
	t.Helper()
	ctx := context.Background()
	m, rev, err := e.runner.Load(ctx, machineID)
	require.NoError(t, err)
	p, err := e.runner.Pending(ctx, store.Filter{MachineID: machineID})
	require.NoError(t, err)
	return fingerprint{Revision: rev, History: len(m.History()), Pending: p}
}

func (e *env) requireUnchanged(t testing.TB, before fingerprint, machineID string) {
	t.Helper()
	if d := cmp.Diff(before, e.fingerprint(t, machineID)); d != "" {
		t.Fatalf("machine %s changed (-before +after):\n%s", machineID, d)
	}
}

// request builds an unsigned request to the test server.
func (e *env) request(t testing.TB, method, path, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// signed builds a request signed at the handler's current time.
func (e *env) signed(t testing.TB, method, path, body string) *http.Request {
	t.Helper()
	req := e.request(t, method, path, body)
	resumehttp.SignRequest(secret, req, []byte(body), e.clock.Now())
	return req
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func do(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// call sends a signed request and returns the response.
func (e *env) call(t testing.TB, method, path, body string) response {
	t.Helper()
	return do(t, e.signed(t, method, path, body))
}

func decode[T any](t testing.TB, r response) T {
	t.Helper()
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var v T
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "body: %s", r.Body)
	return v
}

// requireOK asserts a 200 and decodes its body.
func requireOK[T any](t testing.TB, r response) T {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	return decode[T](t, r)
}

// requireError asserts an error response with its JSON body.
func requireError(t testing.TB, r response, status int, code string) resumehttp.ErrorBody {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	eb := decode[resumehttp.ErrorBody](t, r)
	require.Equal(t, code, eb.Code, "body: %s", r.Body)
	require.NotEmpty(t, eb.Error)
	return eb
}

func resumePath(id string) string { return "/suspensions/" + id + "/resume" }
