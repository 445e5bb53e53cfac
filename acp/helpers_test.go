package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/acp"
	"github.com/markov-agents/markov/acp/acpdemo"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// client is an ACP client on the Go SDK's client side that records what
// the agent sends it, one line per update. It offers no file system and
// no terminal: the agent never asks for them, and a call of one of those
// methods would panic on the nil Client it embeds for them.
type client struct {
	acpsdk.Client
	lines   testkit.Log[string]
	mu      sync.Mutex
	awaits  []acp.AwaitResumptionRequest
	answers []string // option IDs to answer permission requests with, in order
	asked   []acpsdk.RequestPermissionRequest
}

var (
	_ acpsdk.Client                 = (*client)(nil)
	_ acpsdk.ExtensionMethodHandler = (*client)(nil)
)

// add records a line.
func (c *client) add(format string, args ...any) { c.lines.Add(fmt.Sprintf(format, args...)) }

// take returns the lines recorded since the last take.
func (c *client) take() []string { return c.lines.Take() }

// awaits are the await_resumption requests received.
func (h *harness) awaits() []acp.AwaitResumptionRequest {
	h.cl.mu.Lock()
	defer h.cl.mu.Unlock()
	return append([]acp.AwaitResumptionRequest(nil), h.cl.awaits...)
}

// text is the agent message text among lines.
func text(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if t, ok := strings.CutPrefix(l, "agent: "); ok {
			b.WriteString(t)
		}
	}
	return b.String()
}

// kinds are the lines that are not message chunks.
func kinds(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "agent: ") && !strings.HasPrefix(l, "user: ") {
			out = append(out, l)
		}
	}
	return out
}

func (c *client) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		c.add("agent: %s", u.AgentMessageChunk.Content.Text.Text)
	case u.UserMessageChunk != nil:
		c.add("user: %s", u.UserMessageChunk.Content.Text.Text)
	case u.ToolCall != nil:
		c.add("tool_call %s %s", u.ToolCall.Title, u.ToolCall.Status)
	case u.ToolCallUpdate != nil:
		c.add("tool_call_update %s", *u.ToolCallUpdate.Status)
	default:
		c.add("other")
	}
	return nil
}

func (c *client) RequestPermission(_ context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.asked = append(c.asked, p)
	answer := acp.OptionDeny
	if len(c.answers) > 0 {
		answer, c.answers = c.answers[0], c.answers[1:]
	}
	c.mu.Unlock()
	c.add("permission %s -> %s", *p.ToolCall.Title, answer)
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(acpsdk.PermissionOptionId(answer))}, nil
}

func (c *client) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case acp.MethodUpdate:
		var n struct {
			Update map[string]any `json:"update"`
		}
		if err := json.Unmarshal(params, &n); err != nil {
			return nil, err
		}
		switch n.Update["sessionUpdate"] {
		case acp.UpdateSuspended:
			c.add("suspended %s", n.Update["initiator"])
		case acp.UpdateResumed:
			c.add("resumed %s input=%v continue=%v", n.Update["cause"], n.Update["hadResumeInput"], n.Update["continueTranscript"])
		}
		return nil, nil
	case acp.MethodAwaitResumption:
		var r acp.AwaitResumptionRequest
		if err := json.Unmarshal(params, &r); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.awaits = append(c.awaits, r)
		c.mu.Unlock()
		c.add("await_resumption %s", r.Reason)
		return acp.AwaitResumptionResponse{Handle: r.Meta["handle"].(string), SuspendedAt: r.Meta["suspendedAt"].(string)}, nil
	}
	return nil, acpsdk.NewMethodNotFound(method)
}

// stores are the stores the tests run on.
var stores = map[string]func(t *testing.T) store.Store{
	"memstore": func(*testing.T) store.Store { return memstore.New() },
	"sqlite": func(t *testing.T) store.Store {
		return sqlitetest.Open(t, sqlitetest.Path(t))
	},
}

// harness is an agent serving the desk charter to a client over pipes.
type harness struct {
	t      *testing.T
	ctx    context.Context
	runner *durable.Runner
	cl     *client
	conn   *acpsdk.ClientSideConnection
}

// newRunner is a runner of charter on st.
func newRunner(t *testing.T, st store.Store, charter *machine.Charter) *durable.Runner {
	r, err := durable.New(durable.Config{Store: st, Charter: charter})
	require.NoError(t, err)
	return r
}

// deskRunner is a runner of the desk charter on st.
func deskRunner(t *testing.T, st store.Store) *durable.Runner {
	charter, err := acpdemo.NewCharter(acpdemo.ScriptedModel())
	require.NoError(t, err)
	return newRunner(t, st, charter)
}

// serve starts an agent on runner and connects a client to it; the
// connection closes when the test ends. A store without an event log
// is checked for resumes from elsewhere every 5 ms.
func serve(t *testing.T, runner *durable.Runner, node string) *harness {
	t.Helper()
	return serveConfig(t, acp.Config{Runner: runner, Node: node, WatchInterval: 5 * time.Millisecond})
}

// serveConfig is serve with the agent's whole configuration.
func serveConfig(t *testing.T, cfg acp.Config) *harness {
	t.Helper()
	runner := cfg.Runner
	agent, err := acp.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- agent.Serve(ctx, agentIn, agentOut) }()
	cl := &client{}
	conn := acpsdk.NewClientSideConnection(cl, clientOut, clientIn)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		_ = clientOut.Close()
		require.NoError(t, <-served)
		_ = agentOut.Close()
		cancel()
	})
	return &harness{t: t, ctx: ctx, runner: runner, cl: cl, conn: conn}
}

// newSession initializes the connection and opens a session.
func (h *harness) newSession() string {
	h.t.Helper()
	_, err := h.conn.Initialize(h.ctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber,
		ClientInfo: &acpsdk.Implementation{Name: "gotest", Version: "1"}})
	require.NoError(h.t, err)
	s, err := h.conn.NewSession(h.ctx, acpsdk.NewSessionRequest{Cwd: "/", McpServers: []acpsdk.McpServer{}})
	require.NoError(h.t, err)
	return string(s.SessionId)
}

// prompt sends text and returns the stop reason.
func (h *harness) prompt(id, text string) acpsdk.StopReason {
	h.t.Helper()
	resp, err := h.conn.Prompt(h.ctx, acpsdk.PromptRequest{SessionId: acpsdk.SessionId(id), Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
	require.NoError(h.t, err)
	return resp.StopReason
}

// call sends an extension request and decodes its result into out.
func (h *harness) call(method string, params, out any) error {
	raw, err := h.conn.CallExtension(h.ctx, method, params)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// signalAndSeeResumed signals ci.passed through another runner on st and
// waits for h's client to be told that the session's park resumed, and
// what the resumed run answered.
func signalAndSeeResumed(t *testing.T, h *harness, st store.Store) {
	t.Helper()
	signalCI(t, st)
	seeResumed(t, h)
}

// signalCI signals ci.passed through another runner on st, which wakes
// one suspension.
func signalCI(t *testing.T, st store.Store) {
	t.Helper()
	woken, err := deskRunner(t, st).Signal(context.Background(), "ci.passed", "green")
	require.NoError(t, err)
	require.Equal(t, 1, woken)
}

// seeResumed waits for h's client to be told that the session's park
// resumed on ci.passed, and what the resumed run answered.
func seeResumed(t *testing.T, h *harness) {
	t.Helper()
	var lines []string
	require.Eventually(t, func() bool {
		lines = append(lines, h.cl.take()...)
		return strings.Contains(text(lines), "happened")
	}, 10*time.Second, time.Millisecond)
	require.Contains(t, lines, "resumed condition_fired input=false continue=true")
	require.Equal(t, `Done: ci.passed happened: "green"`, text(lines))
}
