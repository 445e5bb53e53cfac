package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/require"

	markova2a "github.com/markov-agents/markov/a2a"
	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

type desk struct {
	Notes []string `json:"notes"`
}

type orderIn struct {
	Item string `json:"item"`
}

// Quantity is the payload an order waits for.
type Quantity struct {
	Qty int `json:"qty" jsonschema:"how many, at least 1"`
}

type deployIn struct {
	Service string `json:"service"`
}

// deskReply is the scripted model: "ask Q" asks the person Q (free
// text), "order X" orders X (a Quantity), "deploy S" deploys S once it
// is approved elsewhere; a tool result is reported ("Done: …");
// anything else is echoed.
func deskReply(req *llm.Request) (scripted.Reply, error) {
	last := req.Messages[len(req.Messages)-1]
	if done, ok := testkit.Reported(last); ok {
		return scripted.Text(done), nil
	}
	verb, arg, _ := strings.Cut(strings.TrimSpace(last.Text()), " ")
	switch verb {
	case "ask":
		return scripted.Tool(node.AskUserTool, node.AskInput{Question: arg}), nil
	case "order":
		return scripted.Tool("order", orderIn{Item: arg}), nil
	case "deploy":
		return scripted.Tool("deploy", deployIn{Service: arg}), nil
	}
	return scripted.Text("You said: " + last.Text()), nil
}

// deskRunner is a runner of the desk charter on the SQLite file db.
func deskRunner(t *testing.T, db string) (*durable.Runner, *sqlite.Store) {
	t.Helper()
	order := node.NewTool("order", "Order an item; a person gives the quantity.", func(ctx *node.ToolContext[desk], in orderIn) (string, error) {
		return "", ctx.Suspend("how many " + in.Item + "?")
	}, node.ResumeWith[Quantity]())
	deploy := node.NewTool("deploy", "Deploy a service once it is approved in the console.", func(ctx *node.ToolContext[desk], in deployIn) (string, error) {
		return "", ctx.Suspend("approve deploying "+in.Service, instance.WithMetadata(map[string]any{markova2a.DecidedElsewhere: true}))
	})
	note := command.New("note", "Add a note.", func(ctx *command.Context[desk], in orderIn) (int, error) {
		var n int
		err := ctx.Update(func(d *desk) { d.Notes = append(d.Notes, in.Item); n = len(d.Notes) })
		return n, err
	})
	n, err := node.New("desk", node.Config[desk]{Instructions: "Take orders and questions.\nBe brief.",
		Tools: []node.Tool[desk]{node.AskUser[desk](node.AskUserConfig{}), order, deploy}, Commands: []command.Command[desk]{note}})
	require.NoError(t, err)
	ch, err := machine.NewCharter(machine.CharterConfig{Name: "desk", Model: scripted.Func(deskReply), Nodes: []*node.Node{n}})
	require.NoError(t, err)
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: db})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	r, err := durable.New(durable.Config{Store: st, Charter: ch})
	require.NoError(t, err)
	return r, st
}

// fixture is a server on a fresh database, served over HTTP.
type fixture struct {
	db     string
	runner *durable.Runner
	srv    *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: sqlitetest.Path(t)}
	f.start(t)
	return f
}

// start serves a new server (a new runner on the same database).
func (f *fixture) start(t *testing.T) {
	t.Helper()
	r, st := deskRunner(t, f.db)
	s, err := markova2a.NewServer(markova2a.ServerConfig{Runner: r, Node: "desk", Records: st, AllowPrivatePush: true, PushBackoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	f.runner, f.srv = r, httptest.NewServer(s)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	t.Cleanup(f.srv.Close)
}

// client is an a2a-go client of the server over binding (JSONRPC or
// HTTP+JSON), found through the agent card.
func (f *fixture) client(t *testing.T, binding a2a.TransportProtocol) *a2aclient.Client {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), f.srv.URL)
	require.NoError(t, err)
	for _, i := range card.SupportedInterfaces {
		if i.ProtocolBinding == binding {
			c, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{i})
			require.NoError(t, err)
			return c
		}
	}
	t.Fatalf("the card has no %s interface", binding)
	return nil
}

var bindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}

func send(t *testing.T, c *a2aclient.Client, msg *a2a.Message) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "the result is a %T, want a task", res)
	return task
}

func text(s string) *a2a.Message { return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(s)) }

// onTask is msg on task.
func onTask(task *a2a.Task, parts ...*a2a.Part) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleUser, task, parts...)
}

// answer is the text of a task's answer artifact.
func answer(t *testing.T, task *a2a.Task) string {
	t.Helper()
	for _, a := range task.Artifacts {
		if a.ID == markova2a.AnswerArtifact {
			var s string
			for _, p := range a.Parts {
				s += p.Text()
			}
			return s
		}
	}
	t.Fatalf("task %s (%s) has no answer artifact", task.ID, task.Status.State)
	return ""
}

// suspensions are the data parts of a task's status message.
func suspensions(t *testing.T, task *a2a.Task) []markova2a.Suspension {
	t.Helper()
	require.NotNil(t, task.Status.Message, "task %s (%s) has no status message", task.ID, task.Status.State)
	var out []markova2a.Suspension
	for _, p := range task.Status.Message.Parts {
		if d, ok := p.Content.(a2a.Data); ok {
			raw, err := json.Marshal(d.Value)
			require.NoError(t, err)
			var s markova2a.Suspension
			require.NoError(t, json.Unmarshal(raw, &s))
			out = append(out, s)
		}
	}
	return out
}

func TestCard(t *testing.T) {
	f := newFixture(t)
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), f.srv.URL)
	require.NoError(t, err)
	require.Equal(t, "desk", card.Name)
	require.True(t, card.Capabilities.Streaming)
	require.True(t, card.Capabilities.PushNotifications)
	var skills []string
	for _, s := range card.Skills {
		skills = append(skills, s.ID+" "+s.Description)
	}
	require.Equal(t, []string{"node:desk Take orders and questions.", "command:note Add a note."}, skills)
	require.Len(t, card.SupportedInterfaces, 2)
	require.Equal(t, f.srv.URL+"/", card.SupportedInterfaces[0].URL)
}

func TestSendCompletes(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			f := newFixture(t)
			c := f.client(t, b)
			task := send(t, c, text("hello"))
			require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
			require.Equal(t, "You said: hello", answer(t, task))
			// The next task of the context continues the same machine.
			next := send(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, a2a.TaskInfo{ContextID: task.ContextID}, a2a.NewTextPart("again")))
			require.NotEqual(t, task.ID, next.ID)
			m, _, err := f.runner.Load(t.Context(), markova2a.MachineID(task.ContextID))
			require.NoError(t, err)
			require.Len(t, m.History(), 4)
		})
	}
}

func TestInputRequiredAnsweredByText(t *testing.T) {
	for _, b := range bindings {
		t.Run(string(b), func(t *testing.T) {
			f := newFixture(t)
			c := f.client(t, b)
			task := send(t, c, text("ask favourite colour?"))
			require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
			sus := suspensions(t, task)
			require.Len(t, sus, 1)
			require.Equal(t, "favourite colour?", sus[0].Reason)
			require.JSONEq(t, `{"type":"string","minLength":1}`, string(sus[0].Schema))
			require.Contains(t, task.Status.Message.Parts[0].Text(), "favourite colour?")

			done := send(t, c, onTask(task, a2a.NewTextPart("blue")))
			require.Equal(t, task.ID, done.ID)
			require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
			require.Equal(t, "Done: blue", answer(t, done))
		})
	}
}

func TestRejectedPayloadConsumesNothing(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	task := send(t, c, text("order apples"))
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	id := suspensions(t, task)[0].SuspendID

	again := send(t, c, onTask(task, a2a.NewDataPart(map[string]any{"qty": "many"})))
	require.Equal(t, a2a.TaskStateInputRequired, again.Status.State)
	sus := suspensions(t, again)
	require.Len(t, sus, 1)
	require.Equal(t, id, sus[0].SuspendID, "the refused answer consumed the suspension")
	require.Contains(t, sus[0].Violation, "qty")
	_, err := f.runner.Call(t.Context(), id)
	require.NoError(t, err, "the suspension is no longer pending")

	part := a2a.NewDataPart(map[string]any{"qty": 3})
	part.SetMeta(markova2a.SuspendIDKey, id)
	done := send(t, c, onTask(task, part))
	require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
	require.Equal(t, `Done: {"qty":3}`, answer(t, done))
}

// requireA2AError fails unless err is the A2A error want, with a message
// that contains words.
func requireA2AError(t *testing.T, err error, want error, words string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, want), "%v is not %v", err, want)
	require.Contains(t, err.Error(), words)
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	ctx := t.Context()

	_, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "no-such-task"})
	requireA2AError(t, err, a2a.ErrTaskNotFound, "")
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: onTask(&a2a.Task{ID: "no-such-task"}, a2a.NewTextPart("x"))})
	require.Error(t, err)

	finished := send(t, c, text("hello"))
	before, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: finished.ID})
	require.NoError(t, err)
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: onTask(finished, a2a.NewTextPart("more"))})
	requireA2AError(t, err, a2a.ErrInvalidParams, "terminal")
	after, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: finished.ID})
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused message changed the task")

	// A suspension another client answered first (here a Go caller).
	task := send(t, c, text("ask name?"))
	id := suspensions(t, task)[0].SuspendID
	for _, err := range f.runner.Run(ctx, markova2a.MachineID(task.ContextID), machine.ResumeInput{SuspendID: id, Payload: "Ada"}) {
		require.NoError(t, err)
	}
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: onTask(task, a2a.NewTextPart("Grace"))})
	requireA2AError(t, err, a2a.ErrInvalidParams, "already answered")

	// Parts that answer nothing, or name a stranger.
	task = send(t, c, text("ask name?"))
	before, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	stranger := a2a.NewTextPart("x")
	stranger.SetMeta(markova2a.SuspendIDKey, "not-a-suspension")
	for _, p := range []*a2a.Part{stranger, a2a.NewFileURLPart("https://example.com/f", "text/plain")} {
		_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: onTask(task, p)})
		requireA2AError(t, err, a2a.ErrInvalidParams, "does not answer")
	}
	after, err = c.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused message changed the task")
}

// awaitState polls task id until it is in state want.
func awaitState(t *testing.T, c *a2aclient.Client, id a2a.TaskID, want a2a.TaskState) *a2a.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
		require.NoError(t, err)
		if task.Status.State == want {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s", id, task.Status.State, want)
		}
		time.Sleep(20 * time.Millisecond) // poll the task's observable state
	}
}

func TestAuthRequiredResolvedElsewhere(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	task := send(t, c, text("deploy api"))
	require.Equal(t, a2a.TaskStateAuthRequired, task.Status.State)
	sus := suspensions(t, task)
	require.Len(t, sus, 1)
	require.True(t, sus[0].DecidedElsewhere)

	_, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: onTask(task, a2a.NewDataPart(true))})
	requireA2AError(t, err, a2a.ErrInvalidParams, "decided elsewhere")

	// The approval comes from a Go caller (the console and the HTTP API
	// resume the same way).
	for _, err := range f.runner.Run(t.Context(), markova2a.MachineID(task.ContextID), machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: "approved"}) {
		require.NoError(t, err)
	}
	done := awaitState(t, c, task.ID, a2a.TaskStateCompleted)
	require.Equal(t, "Done: approved", answer(t, done))
}

func TestStream(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	var states []a2a.TaskState
	var streamed string
	var tools []string
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: text("order pears")}) {
		require.NoError(t, err)
		switch e := ev.(type) {
		case *a2a.Task:
			states = append(states, e.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, e.Status.State)
			if e.Status.Message != nil {
				for _, p := range e.Status.Message.Parts {
					if d, ok := p.Content.(a2a.Data); ok {
						if m, ok := d.Value.(map[string]any); ok && m["name"] == "order" && m["event"] != nil {
							tools = append(tools, m["event"].(string))
						}
					}
				}
			}
		case *a2a.TaskArtifactUpdateEvent:
			streamed += e.Artifact.Parts[0].Text()
		}
	}
	require.Equal(t, a2a.TaskStateSubmitted, states[0])
	require.Equal(t, a2a.TaskStateInputRequired, states[len(states)-1])
	require.Equal(t, []string{"started", "finished"}, tools)
	require.Empty(t, streamed, "the model wrote no text")

	// Text streams into the answer artifact; the final answer replaces it.
	var chunks []*a2a.TaskArtifactUpdateEvent
	var last a2a.TaskState
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: text("hello")}) {
		require.NoError(t, err)
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			chunks = append(chunks, e)
		case *a2a.TaskStatusUpdateEvent:
			last = e.Status.State
		}
	}
	require.Equal(t, a2a.TaskStateCompleted, last)
	require.GreaterOrEqual(t, len(chunks), 2)
	deltas, final := chunks[:len(chunks)-1], chunks[len(chunks)-1]
	streamed = ""
	for i, d := range deltas {
		require.Equal(t, i > 0, d.Append, "delta %d", i)
		streamed += d.Artifact.Parts[0].Text()
	}
	require.Equal(t, "You said: hello", streamed)
	require.False(t, final.Append)
	require.True(t, final.LastChunk)
	require.Equal(t, "You said: hello", final.Artifact.Parts[0].Text())
}

func TestCancel(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolHTTPJSON)
	task := send(t, c, text("ask name?"))
	id := suspensions(t, task)[0].SuspendID
	cancelled, err := cancelTask(t, c, task.ID)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCanceled, cancelled.Status.State)
	sus, err := f.runner.Suspension(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, store.StatusCancelled, sus.Status)
	_, err = c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: "no-such-task"})
	require.Error(t, err)
}

// cancelTask cancels task id. The SDK (v2.3.1, localManager's
// handleCancelWithConcurrentRun) refuses a cancel that meets the
// execution that made the task input-required still winding down
// ("queue is closed"); the client tries again, as one would.
func cancelTask(t *testing.T, c *a2aclient.Client, id a2a.TaskID) (*a2a.Task, error) {
	t.Helper()
	for range 50 {
		task, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id})
		if err == nil || !strings.Contains(err.Error(), "queue is closed") {
			return task, err
		}
	}
	return nil, errors.New("the cancel met a closed queue 50 times")
}

func TestResubscribe(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	task := send(t, c, text("deploy web"))
	require.Equal(t, a2a.TaskStateAuthRequired, task.Status.State)
	events := c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: task.ID})
	next, stop := iter.Pull2(events)
	defer stop()
	first, err, ok := next()
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, task.ID, first.TaskInfo().TaskID)

	sus := suspensions(t, task)
	for _, err := range f.runner.Run(t.Context(), markova2a.MachineID(task.ContextID), machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: "ok"}) {
		require.NoError(t, err)
	}
	var last a2a.TaskState
	for {
		ev, err, ok := next()
		if !ok {
			break
		}
		require.NoError(t, err)
		if e, isStatus := ev.(*a2a.TaskStatusUpdateEvent); isStatus {
			last = e.Status.State
		}
	}
	require.Equal(t, a2a.TaskStateCompleted, last)
}

func TestRestartLosesNothing(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	task := send(t, c, text("order figs"))
	f.srv.Close()
	f.start(t) // another process on the same database
	c = f.client(t, a2a.TransportProtocolJSONRPC)
	got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, got.Status.State)
	done := send(t, c, onTask(task, a2a.NewDataPart(map[string]any{"qty": 2})))
	require.Equal(t, a2a.TaskStateCompleted, done.Status.State)
	require.Equal(t, `Done: {"qty":2}`, answer(t, done))
}

func TestPushConfigs(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	task := send(t, c, text("ask name?"))
	cfg, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: task.ID, URL: "https://hooks.example.com/a2a", Token: "t1"})
	require.NoError(t, err)
	require.NotEmpty(t, cfg.ID)
	got, err := c.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID})
	require.NoError(t, err)
	require.Equal(t, "t1", got.Token)
	list, err := c.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NoError(t, c.DeleteTaskPushConfig(t.Context(), &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID}))
	list, err = c.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestNewServerRefusesBadConfig(t *testing.T) {
	r, st := deskRunner(t, sqlitetest.Path(t))
	for _, cfg := range []markova2a.ServerConfig{
		{Node: "desk", Records: st},
		{Runner: r, Node: "desk"},
		{Runner: r, Node: "nowhere", Records: st},
	} {
		_, err := markova2a.NewServer(cfg)
		require.ErrorIs(t, err, markova2a.ErrInvalidConfig)
	}
}

// A push notification config given with the message gets the task's
// events, the one that made it input-required among them.
func TestPushNotification(t *testing.T) {
	f := newFixture(t)
	got := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("A2A-Notification-Token") + " " + string(body)
	}))
	defer hook.Close()
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: text("ask colour?"),
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: hook.URL, Token: "tok"}}})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case p := <-got:
			require.True(t, strings.HasPrefix(p, "tok "), p)
			if strings.Contains(p, "TASK_STATE_INPUT_REQUIRED") {
				require.Contains(t, p, string(task.ID))
				return
			}
		case <-deadline:
			t.Fatal("no push notification of the input-required task")
		}
	}
}

// A push notification whose receiver fails is kept in the store and
// tried again with backoff — by another server on the same database when
// the first is gone — until it is delivered, once.
func TestPushOutboxRetriesAcrossRestart(t *testing.T) {
	db := sqlitetest.Path(t)
	r, st := deskRunner(t, db)
	failing := true
	got := make(chan string, 16)
	var mu sync.Mutex
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(req.Body)
		got <- req.Header.Get("A2A-Notification-Token") + " " + string(body)
	}))
	defer hook.Close()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	// The first server has no Run: its notifications stay in the outbox.
	first, err := markova2a.NewServer(markova2a.ServerConfig{Runner: r, Node: "desk", Records: st, AllowPrivatePush: true, Logger: logger})
	require.NoError(t, err)
	srv := httptest.NewServer(first)
	res, err := clientOf(t, srv.URL).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: text("ask colour?"),
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: hook.URL, Token: "tok"}}})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	srv.Close()

	second, err := markova2a.NewServer(markova2a.ServerConfig{Runner: r, Node: "desk", Records: st, AllowPrivatePush: true,
		PushBackoff: 20 * time.Millisecond, RunInterval: 10 * time.Millisecond, Logger: logger})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = second.Run(ctx) }()
	defer func() { stop(); <-done }()
	recs, err := st.ListRecords(t.Context(), "a2a.outbox", "")
	require.NoError(t, err)
	require.NotEmpty(t, recs, "the notifications wait in the store")
	require.Eventually(t, func() bool {
		recs, err := st.ListRecords(t.Context(), "a2a.outbox", "")
		return err == nil && len(recs) > 0 && strings.Contains(string(recs[0].Data), `"attempts":1`)
	}, 20*time.Second, 5*time.Millisecond, "a failed attempt is recorded")
	mu.Lock()
	failing = false
	mu.Unlock()
	var states []string
	for len(states) == 0 || !strings.Contains(states[len(states)-1], "TASK_STATE_INPUT_REQUIRED") {
		select {
		case p := <-got:
			require.True(t, strings.HasPrefix(p, "tok "), p)
			require.Contains(t, p, string(task.ID))
			states = append(states, p)
		case <-time.After(20 * time.Second):
			t.Fatalf("no push notification of the input-required task; got %q", states)
		}
	}
	require.Eventually(t, func() bool {
		recs, err := st.ListRecords(t.Context(), "a2a.outbox", "")
		return err == nil && len(recs) == 0
	}, 20*time.Second, 5*time.Millisecond, "delivered notifications leave the outbox")
}

// Push notification URLs on loopback or private addresses are refused
// unless the server allows them: invalid params, nothing stored.
func TestPushConfigRefusesPrivateURL(t *testing.T) {
	r, st := deskRunner(t, sqlitetest.Path(t))
	s, err := markova2a.NewServer(markova2a.ServerConfig{Runner: r, Node: "desk", Records: st})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := clientOf(t, srv.URL)
	task := send(t, c, text("ask name?"))
	for _, url := range []string{"http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.1.2.3/hook", "ftp://hooks.example.com/"} {
		_, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: task.ID, URL: url, Token: "t"})
		require.ErrorIs(t, err, a2a.ErrInvalidParams, url)
	}
	list, err := c.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: text("hello"),
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "http://127.0.0.1:9/hook"}}})
	require.ErrorIs(t, err, a2a.ErrInvalidParams, "a message's push config too")
}

// clientOf is an a2a-go JSON-RPC client of the server at url.
func clientOf(t *testing.T, url string) *a2aclient.Client {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), url)
	require.NoError(t, err)
	c, err := a2aclient.NewFromCard(t.Context(), card)
	require.NoError(t, err)
	return c
}

// A subscription to an auth-required task made by another server on the
// same database (another process) is served from the store: the task,
// then, once the decision is made elsewhere, the run's events and the
// completed status.
func TestSubscribeOnAnotherServer(t *testing.T) {
	f := newFixture(t)
	task := send(t, f.client(t, a2a.TransportProtocolJSONRPC), text("deploy api"))
	require.Equal(t, a2a.TaskStateAuthRequired, task.Status.State)
	first := f.srv
	f.start(t) // another server on the same database
	require.NotEqual(t, first.URL, f.srv.URL)
	c := f.client(t, a2a.TransportProtocolJSONRPC)
	events, stop := iter.Pull2(c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: task.ID}))
	defer stop()
	ev, err, ok := events()
	require.True(t, ok)
	require.NoError(t, err)
	require.Equal(t, task.ID, ev.(*a2a.Task).ID, "the stored task first")

	sus := suspensions(t, task)
	for _, err := range f.runner.Run(t.Context(), markova2a.MachineID(task.ContextID), machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: "approved"}) {
		require.NoError(t, err)
	}
	var last a2a.TaskState
	for {
		ev, err, ok := events()
		if !ok {
			break
		}
		require.NoError(t, err)
		if su, isStatus := ev.(*a2a.TaskStatusUpdateEvent); isStatus {
			last = su.Status.State
		}
	}
	require.Equal(t, a2a.TaskStateCompleted, last)
	got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, got.Status.State)
	require.Equal(t, "Done: approved", answer(t, got))
}
