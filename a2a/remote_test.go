package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// caller is the state of the node that calls remote agents.
type caller struct{}

// goAgent is a remote agent built with the official Go SDK's server. What
// it does depends on the first message's text:
//   - "quick": completes at once with the artifact "quick done";
//   - "fail": fails with "no budget";
//   - "ask": asks "what color?" (input-required, with a schema); the
//     answer's task works until released, then completes with
//     "painted <answer>";
//   - "auth": waits for an authorization (auth-required) until released,
//     then completes with "authorized";
//   - "slow": works until released, then completes with "slow done".
type goAgent struct {
	release   chan struct{}
	cancelled chan sdk.TaskID
}

func (a *goAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		text := textOf(ec.Message)
		if ec.StoredTask == nil {
			if !yield(sdk.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		status := func(s sdk.TaskState, msg string, parts ...*sdk.Part) bool {
			var m *sdk.Message
			if msg != "" {
				m = sdk.NewMessageForTask(sdk.MessageRoleAgent, ec, append([]*sdk.Part{sdk.NewTextPart(msg)}, parts...)...)
			}
			return yield(sdk.NewStatusUpdateEvent(ec, s, m), nil)
		}
		// finish waits in state (with msg) until released, then
		// completes with result.
		finish := func(state sdk.TaskState, msg, result string) {
			if !status(state, msg) {
				return
			}
			select {
			case <-a.release:
			case <-ctx.Done():
				return
			}
			if yield(sdk.NewArtifactEvent(ec, sdk.NewTextPart(result)), nil) {
				status(sdk.TaskStateCompleted, "")
			}
		}
		switch {
		case ec.StoredTask != nil && ec.StoredTask.Status.State == sdk.TaskStateInputRequired:
			finish(sdk.TaskStateWorking, "", "painted "+text)
		case text == "quick":
			if yield(sdk.NewArtifactEvent(ec, sdk.NewTextPart("quick done")), nil) {
				status(sdk.TaskStateCompleted, "")
			}
		case text == "fail":
			status(sdk.TaskStateFailed, "no budget")
		case text == "auth":
			finish(sdk.TaskStateAuthRequired, "sign in at https://painter.example/login", "authorized")
		case text == "ask":
			status(sdk.TaskStateInputRequired, "what color?", sdk.NewDataPart(map[string]any{
				"schema": map[string]any{"type": "string", "enum": []any{"red", "blue"}},
			}))
		default:
			finish(sdk.TaskStateWorking, "", "slow done")
		}
	}
}

func (a *goAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		a.cancelled <- ec.TaskID
		yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCanceled, nil), nil)
	}
}

func textOf(m *sdk.Message) string {
	if m == nil {
		return ""
	}
	var out []string
	for _, p := range m.Parts {
		out = append(out, p.Text())
	}
	return strings.Join(out, "")
}

// startGoAgent serves a goAgent over JSON-RPC, with its card at the
// well-known path and push notifications on; it returns the agent and
// the server.
func startGoAgent(t *testing.T) (*goAgent, *httptest.Server) {
	t.Helper()
	a := &goAgent{release: make(chan struct{}), cancelled: make(chan sdk.TaskID, 1)}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	h := a2asrv.NewHandler(a, a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(nil)),
		a2asrv.WithLogger(slog.New(slog.DiscardHandler))) // its complaints of our 404s
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(h))
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(&sdk.AgentCard{
		Name: "Painter", Description: "paints things", Version: "1",
		Capabilities:        sdk.AgentCapabilities{PushNotifications: true},
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(srv.URL+"/rpc", sdk.TransportProtocolJSONRPC)},
		Skills:              []sdk.AgentSkill{{ID: "paint", Name: "paint", Description: "paints in a color you choose"}},
	}))
	return a, srv
}

// signals records the push notifications that woke a call.
type signals struct {
	s     a2a.Signaler
	woken chan int
}

func (s *signals) Signal(ctx context.Context, event string, payload any) (int, error) {
	n, err := s.s.Signal(ctx, event, payload)
	if err == nil && n > 0 {
		s.woken <- n
	}
	return n, err
}

// env is a durable runner on SQLite whose node has the remote agent as a
// tool, and the endpoint that takes the agent's push notifications.
type env struct {
	r      *durable.Runner
	remote *a2a.Remote
	woken  chan int
}

func newEnv(t *testing.T, cfg a2a.Config, replies ...scripted.Reply) *env {
	t.Helper()
	return newEnvOn(t, sqliteBackend, cfg, replies...)
}

// backend makes the durable runner of an env over charter ch, and what
// signals its machines.
type backend func(t *testing.T, ch *machine.Charter) (*durable.Runner, a2a.Signaler)

// sqliteBackend is a durable runner on SQLite, which runs a signalled
// machine at once.
func sqliteBackend(t *testing.T, ch *machine.Charter) (*durable.Runner, a2a.Signaler) {
	r, err := durable.New(durable.Config{Store: sqlitetest.Open(t, sqlitetest.Path(t)), Charter: ch})
	require.NoError(t, err)
	return r, r
}

// newEnvOn is newEnv on the runner b makes.
func newEnvOn(t *testing.T, b backend, cfg a2a.Config, replies ...scripted.Reply) *env {
	t.Helper()
	e := &env{woken: make(chan int, 8)}
	var sig a2a.Signaler
	pushSrv := httptest.NewServer(a2a.PushHandler(&signals{s: signalerFunc(func(ctx context.Context, ev string, p any) (int, error) {
		return sig.Signal(ctx, ev, p)
	}), woken: e.woken}, nil))
	t.Cleanup(pushSrv.Close)
	if cfg.PushURL == "push" {
		cfg.PushURL = pushSrv.URL
	}
	cfg.Name = "painter"
	cfg.AllowPrivate = true
	remote, err := a2a.NewRemote(cfg)
	require.NoError(t, err)
	tool, err := a2a.Tool[caller](context.Background(), remote)
	require.NoError(t, err)
	n, err := node.New("desk", node.Config[caller]{Tools: []node.Tool[caller]{tool}})
	require.NoError(t, err)
	ch, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(replies...), Nodes: []*node.Node{n},
		Hooks: machine.Hooks{OnResolved: a2a.CancelHook(remote)}})
	require.NoError(t, err)
	e.r, sig = b(t, ch)
	e.remote = remote
	_, err = e.r.Create(context.Background(), "m1", "desk", nil)
	require.NoError(t, err)
	return e
}

type signalerFunc func(ctx context.Context, event string, payload any) (int, error)

func (f signalerFunc) Signal(ctx context.Context, event string, payload any) (int, error) {
	return f(ctx, event, payload)
}

// results returns the tool results machine m1 holds, as the model saw
// them ("error: …" for error results).
func (e *env) results(t *testing.T) []string {
	t.Helper()
	m, _, err := e.r.Load(context.Background(), "m1")
	require.NoError(t, err)
	return testkit.ToolResults(m.History())
}

// pending returns the one pending call of m1.
func (e *env) pending(t *testing.T) instance.SuspendedCall {
	t.Helper()
	list, err := e.r.Pending(context.Background(), store.Filter{MachineID: "m1"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	call, err := e.r.Call(context.Background(), list[0].ID)
	require.NoError(t, err)
	return call
}

// answer resumes suspension id with payload and runs m1 to the end of
// its run.
func (e *env) answer(t *testing.T, id string, payload any) {
	t.Helper()
	run, err := e.r.Resume(context.Background(), machine.ResumeInput{SuspendID: id, Payload: payload})
	require.NoError(t, err)
	_, err = testkit.Collect(run.Steps())
	require.NoError(t, err)
}

func (e *env) start(t *testing.T) {
	t.Helper()
	_, err := testkit.Collect(e.r.Run(context.Background(), "m1", machine.UserText("go")))
	require.NoError(t, err)
}

func TestRemoteCompletesAtOnce(t *testing.T) {
	_, srv := startGoAgent(t)
	e := newEnv(t, a2a.Config{URL: srv.URL, PushURL: "push"}, scripted.Tool("painter", a2a.Request{Message: "quick"}), scripted.Text("done"))
	e.start(t)
	require.Equal(t, []string{"quick done"}, e.results(t))
}

func TestRemoteFailureIsAnErrorResult(t *testing.T) {
	_, srv := startGoAgent(t)
	e := newEnv(t, a2a.Config{URL: srv.URL}, scripted.Tool("painter", a2a.Request{Message: "fail"}), scripted.Text("done"))
	e.start(t)
	require.Equal(t, []string{"error: the agent Painter failed the task: no budget"}, e.results(t))
}

// An input-required task is a suspension of ours; the answer goes to the
// task, the call waits again, and the agent's push notification ends it.
func TestRemoteInputRequiredThenPush(t *testing.T) {
	agent, srv := startGoAgent(t)
	e, q := askColor(t, srv.URL, "Painter")

	// A payload the remote's schema refuses is refused here, nothing consumed.
	_, err := e.r.Resume(context.Background(), machine.ResumeInput{SuspendID: q.SuspendID, Payload: "green"})
	require.Error(t, err)
	require.Equal(t, q.SuspendID, e.pending(t).SuspendID)

	e.answer(t, q.SuspendID, "blue")
	w := e.pending(t)
	require.Contains(t, w.Reason, "waiting for the agent Painter")
	require.NotEmpty(t, w.Conditions().Event, "waits for the push notification")
	require.Empty(t, e.results(t))

	close(agent.release)
	e.pushedUntilDone(t)
	require.Equal(t, []string{"painted blue"}, e.results(t))
}

// askColor starts a call of the agent at url (named agent on its card)
// with "ask", on an env with push notifications, and checks the
// suspension the agent's question makes: its reason, schema and
// metadata. It returns the env and the question.
func askColor(t *testing.T, url, agent string) (*env, instance.SuspendedCall) {
	t.Helper()
	e := newEnv(t, a2a.Config{URL: url, PushURL: "push", Wait: 100 * time.Millisecond, PollMax: time.Hour},
		scripted.Tool("painter", a2a.Request{Message: "ask"}), scripted.Text("done"))
	e.start(t)
	q := e.pending(t)
	require.Equal(t, "the agent "+agent+" asks: what color?", q.Reason)
	require.JSONEq(t, `{"type":"string","enum":["red","blue"]}`, string(q.PayloadSchema))
	meta, err := instance.Decode[a2a.TaskMetadata](q.Metadata)
	require.NoError(t, err)
	require.Equal(t, agent, meta.Agent)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", meta.State)
	require.True(t, q.Conditions().IsZero(), "a question waits for its answer only")
	return e, q
}

// pushedUntilDone waits for push notifications to wake the call until it
// has its result (the agent pushes an artifact, then the completion; no
// poll is due within the test).
func (e *env) pushedUntilDone(t *testing.T) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for len(e.results(t)) == 0 {
		select {
		case n := <-e.woken:
			require.Equal(t, 1, n)
		case <-timeout:
			t.Fatal("no push notification ended the call")
		}
	}
}

// An auth-required task waits like a working one, its reason the
// agent's message; a person's resume says "look now".
func TestRemoteAuthRequiredNudged(t *testing.T) {
	agent, srv := startGoAgent(t)
	e := newEnv(t, a2a.Config{URL: srv.URL, Wait: 50 * time.Millisecond, PollMax: time.Hour},
		scripted.Tool("painter", a2a.Request{Message: "auth"}), scripted.Text("done"))
	e.start(t)
	w := e.pending(t)
	require.Equal(t, "the agent Painter waits for an authorization: sign in at https://painter.example/login", w.Reason)

	e.answer(t, w.SuspendID, "done") // too early: the agent still waits
	again := e.pending(t)
	require.NotEqual(t, w.SuspendID, again.SuspendID)
	require.Contains(t, again.Reason, "waits for an authorization")

	close(agent.release)
	nudgeUntilDone(t, e)
	require.Equal(t, []string{"authorized"}, e.results(t))
}

// nudgeUntilDone resumes m1's pending call until it has its result (the
// agent completes on its own goroutine after being released), for up to
// ten seconds.
func nudgeUntilDone(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.results(t)) == 0 {
		require.True(t, time.Now().Before(deadline), "timed out")
		e.answer(t, e.pending(t).SuspendID, "done")
	}
}

// Without push notifications the call polls, at its suspension's
// deadline, which the sweeper serves.
func TestRemotePolls(t *testing.T) {
	agent, srv := startGoAgent(t)
	e := newEnv(t, a2a.Config{URL: srv.URL, Wait: 50 * time.Millisecond, PollMin: 10 * time.Millisecond, PollMax: 20 * time.Millisecond},
		scripted.Tool("painter", a2a.Request{Message: "slow"}), scripted.Text("done"))
	e.start(t)
	w := e.pending(t)
	require.Empty(t, w.Conditions().Event)
	require.False(t, w.Conditions().Deadline.IsZero())

	// Polls while the task works suspend the call again.
	sweepUntil(t, e, func() bool { return e.pollsOf(t) >= 2 })
	require.Empty(t, e.results(t))
	close(agent.release)
	sweepUntil(t, e, func() bool { return len(e.results(t)) > 0 })
	require.Equal(t, []string{"slow done"}, e.results(t))
}

// pollsOf returns the polls the pending call has made: 0 when none is
// pending, or when it moved on while being read.
func (e *env) pollsOf(t *testing.T) int {
	list, err := e.r.Pending(context.Background(), store.Filter{MachineID: "m1"})
	require.NoError(t, err)
	if len(list) == 0 {
		return 0
	}
	call, err := e.r.Call(context.Background(), list[0].ID)
	if errors.Is(err, instance.ErrAlreadyResolved) || errors.Is(err, instance.ErrUnknownSuspendID) {
		return 0 // the call moved on between the two reads
	}
	require.NoError(t, err)
	meta, err := instance.Decode[a2a.TaskMetadata](call.Metadata)
	require.NoError(t, err)
	return meta.Polls
}

// sweepUntil sweeps expired suspensions until done holds, for up to ten
// seconds.
func sweepUntil(t *testing.T, e *env, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		require.True(t, time.Now().Before(deadline), "timed out")
		_, err := e.r.Sweep(context.Background(), 0)
		require.NoError(t, err)
	}
}

// Cancelling the waiting call cancels the remote task.
func TestRemoteCancelCancelsTheTask(t *testing.T) {
	agent, srv := startGoAgent(t)
	e := newEnv(t, a2a.Config{URL: srv.URL, Wait: 50 * time.Millisecond, PollMax: time.Hour},
		scripted.Tool("painter", a2a.Request{Message: "slow"}), scripted.Text("done"))
	e.start(t)
	w := e.pending(t)
	meta, err := instance.Decode[a2a.TaskMetadata](w.Metadata)
	require.NoError(t, err)

	run, err := e.r.Cancel(context.Background(), machine.CancelInput{SuspendID: w.SuspendID, Reason: "not needed"})
	require.NoError(t, err)
	_, err = testkit.Collect(run.Steps())
	require.NoError(t, err)
	select {
	case id := <-agent.cancelled:
		require.Equal(t, meta.TaskID, string(id))
	case <-time.After(10 * time.Second):
		t.Fatal("the remote task was not cancelled")
	}
	require.Equal(t, []string{"error: cancelled: not needed"}, e.results(t))
}

// flaky serves the agent until broken, then answers garbage.
type flaky struct {
	mu     sync.Mutex
	broken bool
	next   http.Handler
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	broken := f.broken
	f.mu.Unlock()
	if broken && r.Method == http.MethodPost {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":"x","result":{"id":42}}garbage`))
		return
	}
	f.next.ServeHTTP(w, r)
}

// A remote that answers garbage, or disappears, makes polls fail; the
// call polls again, then gives up with an error result. Never a panic.
func TestRemoteGarbageThenGone(t *testing.T) {
	_, srv := startGoAgent(t)
	f := &flaky{next: srv.Config.Handler}
	proxy := httptest.NewServer(f)
	card := &sdk.AgentCard{Name: "Painter", SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(proxy.URL+"/rpc", sdk.TransportProtocolJSONRPC)}}
	e := newEnv(t, a2a.Config{Card: card, Wait: 10 * time.Millisecond, PollMin: time.Millisecond, PollMax: time.Millisecond, MaxPollFailures: 2},
		scripted.Tool("painter", a2a.Request{Message: "slow"}), scripted.Text("done"))
	e.start(t)
	f.mu.Lock()
	f.broken = true
	f.mu.Unlock()
	sweepUntil(t, e, func() bool {
		w, err := e.r.Pending(context.Background(), store.Filter{MachineID: "m1"})
		require.NoError(t, err)
		if len(w) == 0 {
			return true
		}
		call, err := e.r.Call(context.Background(), w[0].ID)
		require.NoError(t, err)
		return strings.Contains(call.Reason, "the last poll failed")
	})
	proxy.Close() // gone
	sweepUntil(t, e, func() bool { return len(e.results(t)) > 0 })
	got := e.results(t)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "error: gave up on the task")
}

// Outbound connections to private addresses are refused unless allowed.
func TestRemoteRefusesPrivateAddresses(t *testing.T) {
	_, srv := startGoAgent(t)
	_, err := a2a.NewRemote(a2a.Config{Name: "painter", URL: srv.URL})
	require.ErrorIs(t, err, a2a.ErrForbiddenAddress)
	_, err = a2a.NewRemote(a2a.Config{Name: "painter", URL: "https://agent.example", PushURL: "http://localhost:8080/push"})
	require.ErrorIs(t, err, a2a.ErrForbiddenAddress)
	_, err = a2a.NewRemote(a2a.Config{Name: "painter", URL: "ftp://agent.example"})
	require.ErrorIs(t, err, a2a.ErrInvalidConfig)
	_, err = a2a.NewRemote(a2a.Config{Name: "no such name!"})
	require.ErrorIs(t, err, a2a.ErrInvalidConfig)

	// A card naming a private address: the connection is refused.
	card := &sdk.AgentCard{Name: "Painter", SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(srv.URL+"/rpc", sdk.TransportProtocolJSONRPC)}}
	remote, err := a2a.NewRemote(a2a.Config{Name: "painter", Card: card})
	require.NoError(t, err)
	tool, err := a2a.Tool[caller](context.Background(), remote)
	require.NoError(t, err)
	n, err := node.New("desk", node.Config[caller]{Tools: []node.Tool[caller]{tool}})
	require.NoError(t, err)
	ch, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(scripted.Tool("painter", a2a.Request{Message: "quick"}), scripted.Text("done")), Nodes: []*node.Node{n}})
	require.NoError(t, err)
	m, err := ch.NewMachine("desk", nil)
	require.NoError(t, err)
	_, err = testkit.Collect(m.Run(context.Background(), machine.UserText("go")))
	require.NoError(t, err)
	got := testkit.ToolResults(m.History())
	require.Len(t, got, 1)
	require.Contains(t, got[0], "is not a public address")
}

// busyOnce refuses the SendMessage calls after the first, refuse of them,
// as a2a-go's server does while a task's previous execution is still
// ending ("task execution is already in progress"), then serves the
// agent.
type busyOnce struct {
	mu      sync.Mutex
	sends   int
	refuse  int // how many sends after the first to refuse
	refused int
	next    http.Handler
}

func (b *busyOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var call struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if r.Method == http.MethodPost && json.Unmarshal(body, &call) == nil && call.Method == "SendMessage" {
		b.mu.Lock()
		b.sends++
		busy := b.sends > 1 && b.refused < b.refuse
		if busy {
			b.refused++
		}
		b.mu.Unlock()
		if busy {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"task execution is already in progress"}}`, call.ID)
			return
		}
	}
	b.next.ServeHTTP(w, r)
}

// An answer the agent refuses for a moment, as its task's previous
// execution ends, is sent again and reaches the task: not an error
// result.
func TestRemoteAnswerSentAgainWhileInProgress(t *testing.T) {
	agent, srv := startGoAgent(t)
	b := &busyOnce{refuse: 2, next: srv.Config.Handler}
	proxy := httptest.NewServer(b)
	t.Cleanup(proxy.Close)
	card := &sdk.AgentCard{Name: "Painter", Capabilities: sdk.AgentCapabilities{PushNotifications: true},
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(proxy.URL+"/rpc", sdk.TransportProtocolJSONRPC)}}
	e := newEnv(t, a2a.Config{Card: card, PushURL: "push", Wait: 100 * time.Millisecond, PollMax: time.Hour},
		scripted.Tool("painter", a2a.Request{Message: "ask"}), scripted.Text("done"))
	e.start(t)
	q := e.pending(t)
	e.answer(t, q.SuspendID, "blue")
	b.mu.Lock()
	require.Equal(t, 2, b.refused, "the answer was refused twice, then sent")
	b.mu.Unlock()
	require.Contains(t, e.pending(t).Reason, "waiting for the agent Painter")
	close(agent.release)
	e.pushedUntilDone(t)
	require.Equal(t, []string{"painted blue"}, e.results(t))
}
