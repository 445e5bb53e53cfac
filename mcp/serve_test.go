package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// secret signs the test servers' requestState.
var secret = []byte(strings.Repeat("k", 32))

type frontDesk struct {
	Notes []string `json:"notes"`
}

type question struct {
	Text string `json:"text"`
}

type reply struct {
	Text string `json:"text"`
}

// deskReply is the front desk's scripted model: "ask Q" calls ask,
// "deploy S" calls deploy (a no asks again), "both" calls both at once; a tool result is
// reported ("Done: …"); anything else is echoed.
func deskReply(req *llm.Request) (scripted.Reply, error) {
	last := req.Messages[len(req.Messages)-1]
	if done, ok := testkit.Reported(last); ok {
		return scripted.Text(done), nil
	}
	verb, arg, _ := strings.Cut(strings.TrimSpace(last.Text()), " ")
	switch verb {
	case "ask":
		return scripted.Tool("ask", question{Text: arg}), nil
	case "deploy":
		return scripted.Tool("deploy", question{Text: arg}), nil
	case "both":
		return scripted.Tools(scripted.Call{ID: "c1", Name: "ask", Input: question{Text: "color?"}},
			scripted.Call{ID: "c2", Name: "deploy", Input: question{Text: "api"}}), nil
	}
	return scripted.Text("You said: " + last.Text()), nil
}

// deskRunner is a runner of the front desk on a fresh SQLite file.
func deskRunner(t *testing.T) *durable.Runner {
	t.Helper()
	return deskRunnerAt(t, sqlitetest.Path(t))
}

// deskRunnerAt is a runner of the front desk on the SQLite file db.
func deskRunnerAt(t testing.TB, db string) *durable.Runner {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: db})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return deskRunnerOn(t, st)
}

// deskRunnerOn is a runner of the front desk charter on st.
func deskRunnerOn(t testing.TB, st store.Store) *durable.Runner {
	t.Helper()
	ask := node.NewTool("ask", "Ask a person.", func(ctx *node.ToolContext[frontDesk], in question) (string, error) {
		return "", ctx.Suspend("a person must answer: " + in.Text)
	}, node.OnResume(func(_ *node.ToolContext[frontDesk], in question, r node.Resumed[reply]) (string, error) {
		if r.IsError {
			return in.Text + " " + r.Text(), nil
		}
		return in.Text + " " + r.Payload.Text, nil
	}))
	deploy := node.NewTool("deploy", "Deploy, once a person agrees.", func(ctx *node.ToolContext[frontDesk], in question) (string, error) {
		return "", ctx.Suspend("deploy " + in.Text + "?")
	}, node.OnResume(func(ctx *node.ToolContext[frontDesk], in question, r node.Resumed[bool]) (string, error) {
		if !r.Payload {
			return "", ctx.Suspend("deploy " + in.Text + "? say yes")
		}
		return in.Text + " deployed", nil
	}))
	note := command.New("note", "Add a note.", func(ctx *command.Context[frontDesk], in question) (int, error) {
		var n int
		err := ctx.Update(func(d *frontDesk) { d.Notes = append(d.Notes, in.Text); n = len(d.Notes) })
		return n, err
	})
	n, err := node.New("front", node.Config[frontDesk]{Tools: []node.Tool[frontDesk]{ask, deploy}, Commands: []command.Command[frontDesk]{note}})
	require.NoError(t, err)
	ch, err := machine.NewCharter(machine.CharterConfig{Name: "front", Model: scripted.Func(deskReply), Nodes: []*node.Node{n}})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: st, Charter: ch})
	require.NoError(t, err)
	return r
}

// connect serves srv to a Go SDK client in memory, with the client's
// multi round-trip driver off: the test sees input_required results.
func connect(t *testing.T, srv *mcp.Server, opts *sdk.ClientSessionOptions) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(t.Context(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true}})
	cs, err := c.Connect(t.Context(), ct, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func newServer(t *testing.T, r *durable.Runner, now func() time.Time) *mcp.Server {
	t.Helper()
	srv, err := mcp.NewServer(mcp.ServerConfig{Runner: r, Secret: secret, Node: "front", Now: now})
	require.NoError(t, err)
	return srv
}

func converse(t *testing.T, cs *sdk.ClientSession, args map[string]any, state string, answers sdk.InputResponseMap) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: args, RequestState: state, InputResponses: answers})
	require.NoError(t, err)
	return res
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func text(res *sdk.CallToolResult) string { return mcp.Text(res) }

func TestServerToolsAndConversation(t *testing.T) {
	r := deskRunner(t)
	cs := connect(t, newServer(t, r, nil), nil)

	tools, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 2)
	require.Equal(t, "note", tools.Tools[0].Name)
	schema, err := json.Marshal(tools.Tools[0].InputSchema)
	require.NoError(t, err)
	require.Contains(t, string(schema), `"machine_id"`)
	require.Contains(t, string(schema), `"input":{"additionalProperties":false,"properties":{"text":{"type":"string"}}`)
	require.Equal(t, mcp.ConversationTool, tools.Tools[1].Name)

	res := converse(t, cs, map[string]any{"message": "hello", "conversation": "c1"}, "", nil)
	require.False(t, res.NeedsInput())
	require.Equal(t, "You said: hello", text(res))
	id := mcp.ConversationID("c1")
	require.Equal(t, map[string]any{"machine_id": id, "answer": "You said: hello"}, res.StructuredContent)
	res = converse(t, cs, map[string]any{"message": "again", "machine_id": id}, "", nil)
	require.Equal(t, "You said: again", text(res))
	m, _, err := r.Load(t.Context(), id)
	require.NoError(t, err)
	require.Len(t, m.History(), 4, "the same machine took both messages")

	// A new conversation without a key.
	res = converse(t, cs, map[string]any{"message": "hi"}, "", nil)
	other := res.StructuredContent.(map[string]any)["machine_id"].(string)
	require.NotEqual(t, id, other)

	// The command tool runs on the named machine.
	res, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "note", Arguments: map[string]any{"machine_id": id, "input": map[string]any{"text": "vip"}}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	require.Equal(t, map[string]any{"machine_id": id, "answer": "You said: again", "result": float64(1)}, res.StructuredContent)
	res, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "note", Arguments: map[string]any{"machine_id": id, "input": map[string]any{"text": 7}}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, text(res), "text")

	// Bad arguments are error results.
	res = converse(t, cs, map[string]any{"message": "x", "conversation": "c1", "machine_id": id}, "", nil)
	require.True(t, res.IsError)
	require.Equal(t, "give conversation or machine_id, not both", text(res))
	res = converse(t, cs, map[string]any{"message": "x", "machine_id": "m_nope"}, "", nil)
	require.True(t, res.IsError)
	require.Contains(t, text(res), "machine_id m_nope")
}

func TestServerInputRequired(t *testing.T) {
	r := deskRunner(t)
	cs := connect(t, newServer(t, r, nil), nil)
	args := map[string]any{"message": "ask color?", "conversation": "c2"}
	res := converse(t, cs, args, "", nil)
	require.True(t, res.NeedsInput())
	require.NotEmpty(t, res.RequestState)
	require.Len(t, res.InputRequests, 1)
	var sid string
	var ep *sdk.ElicitParams
	for k, v := range res.InputRequests {
		sid, ep = k, v.(*sdk.ElicitParams)
	}
	require.Equal(t, "a person must answer: color?", ep.Message)
	require.Contains(t, jsonText(t, ep.RequestedSchema), `"text"`)

	// A bad answer: input_required again, with the violation; nothing
	// consumed.
	bad := converse(t, cs, args, res.RequestState, sdk.InputResponseMap{sid: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": 5}}})
	require.True(t, bad.NeedsInput())
	again := bad.InputRequests[sid].(*sdk.ElicitParams)
	require.Equal(t, "a person must answer: color?\n\nThe answer was refused: text: expected string, got integer", again.Message)
	pending, err := r.Pending(t.Context(), store.Filter{MachineID: mcp.ConversationID("c2"), Status: store.StatusPending})
	require.NoError(t, err)
	require.Len(t, pending, 1)

	// The good answer resumes the machine, which runs to its answer.
	res = converse(t, cs, args, bad.RequestState, sdk.InputResponseMap{sid: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": "blue"}}})
	require.False(t, res.NeedsInput())
	require.Equal(t, "Done: color? blue", text(res))

	// The same answer again: already resolved, the current state (the
	// answer), not an error.
	res = converse(t, cs, args, bad.RequestState, sdk.InputResponseMap{sid: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": "red"}}})
	require.Equal(t, "Done: color? blue", text(res))
}

func TestServerSeveralRequests(t *testing.T) {
	r := deskRunner(t)
	cs := connect(t, newServer(t, r, nil), nil)
	args := map[string]any{"message": "both", "conversation": "c3"}
	res := converse(t, cs, args, "", nil)
	require.Len(t, res.InputRequests, 2)
	var askID, deployID string
	for k, v := range res.InputRequests {
		ep := v.(*sdk.ElicitParams)
		if strings.HasPrefix(ep.Message, "deploy") {
			deployID = k
			// A boolean payload is asked as a form of one field.
			require.JSONEq(t, `{"type":"object","properties":{"value":{"type":"boolean"}},"required":["value"]}`, jsonText(t, ep.RequestedSchema))
		} else {
			askID = k
		}
	}
	// One answer: the other is asked again.
	res = converse(t, cs, args, res.RequestState, sdk.InputResponseMap{deployID: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"value": true}}})
	require.True(t, res.NeedsInput())
	require.Len(t, res.InputRequests, 1)
	require.Contains(t, res.InputRequests, askID)
	// A decline resumes it with an error.
	res = converse(t, cs, args, res.RequestState, sdk.InputResponseMap{askID: &sdk.ElicitResult{Action: "decline"}})
	require.False(t, res.NeedsInput())
	require.Contains(t, text(res), "declined")
	require.Contains(t, text(res), "api deployed")
}

func TestServerRefusesBadState(t *testing.T) {
	r := deskRunner(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	cs := connect(t, newServer(t, r, func() time.Time { return now }), nil)
	args := map[string]any{"message": "ask why?", "conversation": "c4"}
	res := converse(t, cs, args, "", nil)
	var sid string
	for k := range res.InputRequests {
		sid = k
	}
	answer := sdk.InputResponseMap{sid: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": "because"}}}
	refused := func(args map[string]any, state, want string) {
		t.Helper()
		_, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: args, RequestState: state, InputResponses: answer})
		var jerr *jsonrpc.Error
		require.True(t, errors.As(err, &jerr), "%v", err)
		require.EqualValues(t, jsonrpc.CodeInvalidParams, jerr.Code)
		require.Contains(t, jerr.Message, want)
	}
	refused(args, "x"+res.RequestState[1:], "bad continuation token")
	refused(args, res.RequestState+"x", "bad continuation token")
	refused(map[string]any{"message": "x", "conversation": "other"}, res.RequestState, "another machine")
	answer = sdk.InputResponseMap{"NOT_IN_THE_STATE": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": "x"}}}
	refused(args, res.RequestState, "inputResponses: bridge: suspension not named by the token")
	answer = sdk.InputResponseMap{sid: &sdk.ElicitResult{Action: "shrug"}}
	refused(args, res.RequestState, "inputResponses: bridge: invalid answer")
	now = now.Add(25 * time.Hour)
	refused(args, res.RequestState, "requestState: bridge: continuation token expired")
	pending, err := r.Pending(t.Context(), store.Filter{MachineID: mcp.ConversationID("c4"), Status: store.StatusPending})
	require.NoError(t, err)
	require.Len(t, pending, 1, "nothing consumed")

	// A state for a machine deleted since.
	answer = sdk.InputResponseMap{sid: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": "because"}}}
	now = now.Add(-25 * time.Hour)
	require.NoError(t, r.Delete(t.Context(), mcp.ConversationID("c4")))
	refused(args, res.RequestState, "requestState: machine "+mcp.ConversationID("c4")+": ")
}

// Over Streamable HTTP in stateless mode, the Go SDK's client driver
// answers input_required from its elicitation handler and retries: the
// caller sees the final result.
func TestServerStatelessHTTP(t *testing.T) {
	r := deskRunner(t)
	hs := httptest.NewServer(newServer(t, r, nil).Handler())
	defer hs.Close()
	var asked []string
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": "green"}}, nil
		},
	})
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: map[string]any{"message": "ask color?", "conversation": "h1"}})
	require.NoError(t, err)
	require.Equal(t, "Done: color? green", text(res))
	require.Equal(t, []string{"a person must answer: color?"}, asked)
}

// A client of the 2025-11-25 protocol is asked by the SDK's shim with
// elicitation/create; a machine still waiting after the one retry the
// shim makes (here the deploy, answered no, asks again) is a waiting
// result.
func TestServerLegacyClient(t *testing.T) {
	r := deskRunner(t)
	srv := newServer(t, r, nil)
	ct, st := sdk.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(t.Context(), st, nil)
	require.NoError(t, err)
	defer ss.Close()
	answers := []map[string]any{{"text": "teal"}, {"value": false}}
	c := sdk.NewClient(&sdk.Implementation{Name: "old", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			a := answers[0]
			answers = answers[1:]
			return &sdk.ElicitResult{Action: "accept", Content: a}, nil
		},
	})
	cs, err := c.Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: map[string]any{"message": "ask color?", "conversation": "l1"}})
	require.NoError(t, err)
	require.Equal(t, "Done: color? teal", text(res))

	res, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: map[string]any{"message": "deploy api", "conversation": "l1"}})
	require.NoError(t, err)
	require.Contains(t, text(res), "waits for input")
	require.Contains(t, text(res), ": deploy api? say yes")
	require.Equal(t, "input_required", res.StructuredContent.(map[string]any)["status"])
}

// A client of the 2025-11-25 protocol over stateless HTTP cannot be
// asked (the server cannot send it a request): it gets a waiting result
// naming the machine and what it waits for.
func TestServerLegacyClientStatelessHTTP(t *testing.T) {
	r := deskRunner(t)
	hs := httptest.NewServer(newServer(t, r, nil).Handler())
	defer hs.Close()
	c := sdk.NewClient(&sdk.Implementation{Name: "old", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			t.Error("the server sent elicitation/create over stateless HTTP")
			return nil, errors.New("unexpected")
		},
	})
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: hs.URL}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: map[string]any{"message": "ask color?", "conversation": "lh"}})
	require.NoError(t, err)
	w := res.StructuredContent.(map[string]any)
	require.Equal(t, "input_required", w["status"])
	require.Equal(t, mcp.ConversationID("lh"), w["machine_id"])
	pending := w["pending"].([]any)
	require.Len(t, pending, 1)
	require.Equal(t, "a person must answer: color?", pending[0].(map[string]any)["reason"])
}

func TestNewServerConfig(t *testing.T) {
	r := deskRunner(t)
	for _, tc := range []struct {
		cfg  mcp.ServerConfig
		want string
	}{
		{mcp.ServerConfig{Secret: secret, Node: "front"}, "mcp: invalid config: no Runner"},
		{mcp.ServerConfig{Runner: r, Secret: secret}, `mcp: invalid config: Node "" is not a node of charter front`},
		{mcp.ServerConfig{Runner: r, Secret: secret[:8], Node: "front"}, "mcp: invalid config: bridge: invalid config: Secret of 8 bytes, want at least 32"},
	} {
		_, err := mcp.NewServer(tc.cfg)
		require.ErrorIs(t, err, mcp.ErrInvalidConfig)
		require.EqualError(t, err, tc.want)
	}

	clash := command.New(mcp.ConversationTool, "clash", func(*command.Context[frontDesk], question) (string, error) { return "", nil })
	n, err := node.New("front", node.Config[frontDesk]{Commands: []command.Command[frontDesk]{clash}})
	require.NoError(t, err)
	ch, err := machine.NewCharter(machine.CharterConfig{Name: "front", Model: scripted.Func(deskReply), Nodes: []*node.Node{n}})
	require.NoError(t, err)
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: sqlitetest.Path(t)})
	require.NoError(t, err)
	defer st.Close()
	r, err = durable.New(durable.Config{Store: st, Charter: ch})
	require.NoError(t, err)
	_, err = mcp.NewServer(mcp.ServerConfig{Runner: r, Secret: secret, Node: "front"})
	require.ErrorIs(t, err, mcp.ErrInvalidConfig)
	require.ErrorContains(t, err, "the charter's command send_message has the conversation tool's name")
}

// The server holds nothing between rounds: another server on the same
// store and secret (another process) takes the retry; one with another
// secret refuses the state.
func TestServerRetryElsewhere(t *testing.T) {
	db := sqlitetest.Path(t)
	first := connect(t, newServer(t, deskRunnerAt(t, db), nil), nil)
	args := map[string]any{"message": "ask size?", "conversation": "x1"}
	res := converse(t, first, args, "", nil)
	require.True(t, res.NeedsInput())
	var sid string
	for k := range res.InputRequests {
		sid = k
	}
	answer := sdk.InputResponseMap{sid: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"text": "large"}}}

	other, err := mcp.NewServer(mcp.ServerConfig{Runner: deskRunnerAt(t, db), Secret: []byte(strings.Repeat("o", 32)), Node: "front"})
	require.NoError(t, err)
	_, err = connect(t, other, nil).CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: args, RequestState: res.RequestState, InputResponses: answer})
	require.ErrorContains(t, err, "requestState: bridge: bad continuation token: signature does not match")

	second := connect(t, newServer(t, deskRunnerAt(t, db), nil), nil)
	res = converse(t, second, args, res.RequestState, answer)
	require.False(t, res.NeedsInput())
	require.Equal(t, "Done: size? large", text(res))
}
