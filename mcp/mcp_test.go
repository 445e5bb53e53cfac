package mcp_test

import (
	"context"
	"iter"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/sqlite"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

type desk struct{}

// goServer returns a client of the Go SDK test server (this binary, as a
// child process over stdio).
func goServer(t *testing.T, cfg mcp.Config) *mcp.Client {
	t.Helper()
	cfg.Name = "srv"
	cfg.Command = []string{os.Args[0], "-test.run=^$"}
	cfg.Env = []string{childEnv + "=serve"}
	c, err := mcp.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// runner returns a durable runner on the SQLite file db whose node has
// c's tools and whose model plays replies.
func runner(t *testing.T, c *mcp.Client, db string, replies ...scripted.Reply) *durable.Runner {
	t.Helper()
	r, closeStore, err := newRunner(c, db, replies...)
	require.NoError(t, err)
	t.Cleanup(closeStore)
	return r
}

// newRunner is runner for a child process; closeStore closes the store.
func newRunner(c *mcp.Client, db string, replies ...scripted.Reply) (r *durable.Runner, closeStore func(), err error) {
	tools, err := mcp.Tools[desk](context.Background(), c)
	if err != nil {
		return nil, nil, err
	}
	n, err := node.New("desk", node.Config[desk]{Tools: tools})
	if err != nil {
		return nil, nil, err
	}
	ch, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(replies...), Nodes: []*node.Node{n}})
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db})
	if err != nil {
		return nil, nil, err
	}
	r, err = durable.New(durable.Config{Store: st, Charter: ch})
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return r, func() { _ = st.Close() }, nil
}

// resumeSteps resumes with in on r and runs the machine to the end of its
// run; a refused resume is the error.
func resumeSteps(ctx context.Context, r *durable.Runner, in machine.ResumeInput) ([]machine.Step, error) {
	run, err := r.Resume(ctx, in)
	if err != nil {
		return nil, err
	}
	return drain(run.Steps())
}

func drain(seq iter.Seq2[machine.Step, error]) ([]machine.Step, error) {
	var out []machine.Step
	for s, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

// results returns the tool results machine m1 of r holds, as the model
// saw them ("error: …" for error results).
func results(t *testing.T, r *durable.Runner) []string {
	t.Helper()
	out, err := resultsOf(r)
	require.NoError(t, err)
	return out
}

func resultsOf(r *durable.Runner) ([]string, error) {
	m, _, err := r.Load(context.Background(), "m1")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, msg := range m.History() {
		for _, p := range msg.Parts {
			if p.Kind == message.KindToolResult {
				if p.IsError {
					out = append(out, "error: "+p.Text)
				} else {
					out = append(out, p.Text)
				}
			}
		}
	}
	return out, nil
}

// call runs one call of the server's tool through a machine and returns
// the result the model saw.
func call(t *testing.T, c *mcp.Client, tool string, input any) string {
	t.Helper()
	return callTool(t, c, "srv_"+tool, input)
}

// callTool is call of the markov tool name.
func callTool(t *testing.T, c *mcp.Client, name string, input any) string {
	t.Helper()
	r := runner(t, c, sqlitetest.Path(t), scripted.Tool(name, input), scripted.Text("done"))
	ctx := context.Background()
	_, err := r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	_, err = drain(r.Run(ctx, "m1", machine.UserText("go")))
	require.NoError(t, err)
	got := results(t, r)
	require.Len(t, got, 1)
	return got[0]
}

// TestTools: the server's tools are markov tools, prefixed, with the
// server's descriptions and schemas; their results reach the model.
func TestTools(t *testing.T) {
	c := goServer(t, mcp.Config{})
	tools, err := mcp.Tools[desk](context.Background(), c)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name())
	}
	require.Contains(t, names, "srv_echo")
	require.Contains(t, names, "srv_ask")

	require.Equal(t, "echo: hi", call(t, c, "echo", map[string]any{"text": "hi"}))
	require.Contains(t, call(t, c, "echo", map[string]any{"text": 7}), "error: ", "an input the schema refuses never reaches the server")
	require.Equal(t, "error: the ledger is closed", call(t, c, "fail", map[string]any{}))
	require.Equal(t, "resource link: file:///r.txt (r.txt)\n{\"n\":2}", call(t, c, "links", map[string]any{}))
	require.Contains(t, call(t, c, "hugeform", map[string]any{}), "error: srv asks for input with a schema markov cannot use: mcp: invalid schema: 71", "a huge elicitation schema is an error result, not a suspension")
}

// TestFaults: a server that exits, hangs, breaks the protocol or answers
// too much gives an error result, and the next call reconnects; the
// server's stderr reaches the log.
func TestFaults(t *testing.T) {
	stderr := make(chan struct{}, 1)
	log := slog.New(notify{"mcp server stderr", stderr, "exiting on request"})
	c := goServer(t, mcp.Config{CallTimeout: 2 * time.Second, MaxResult: 1 << 20, Logger: log})
	for tool, want := range map[string]string{
		"exit":      "srv: call exit",
		"hang":      "no answer within 2s",
		"garbage":   "srv: call garbage: ",
		"truncated": "srv: call truncated: no answer within 2s",
		"big":       "over the limit of 1048576",
	} {
		got := call(t, c, tool, map[string]any{})
		t.Log(tool, got)
		require.Contains(t, got, "error: ", tool)
		require.Contains(t, got, want, tool)
		require.Equal(t, "echo: again", call(t, c, "echo", map[string]any{"text": "again"}), "after "+tool)
	}
	<-stderr // the exiting server's stderr line reached the log
}

// TestToolListChanged: a tool the server withdraws (notifications/
// tools/list_changed) is an error result, without a call.
func TestToolListChanged(t *testing.T) {
	changed := make(chan struct{}, 1)
	log := slog.New(notify{"mcp tool list changed", changed, ""})
	c := goServer(t, mcp.Config{ProtocolVersion: "2025-11-25", Logger: log})
	r := runner(t, c, sqlitetest.Path(t),
		scripted.Tool("srv_echo", map[string]any{"text": "a"}), scripted.Tool("srv_withdraw", map[string]any{}), scripted.Text("ok"),
		scripted.Tool("srv_echo", map[string]any{"text": "b"}), scripted.Text("ok"))
	ctx := context.Background()
	_, err := r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	_, err = drain(r.Run(ctx, "m1", machine.UserText("go")))
	require.NoError(t, err)
	<-changed
	_, err = drain(r.Run(ctx, "m1", machine.UserText("again")))
	require.NoError(t, err)
	require.Equal(t, []string{"echo: a", "echo withdrawn", "error: mcp: server fault: srv no longer offers the tool echo"}, results(t, r))
}

// notify is a slog handler that signals on ch when msg is logged (with
// the attribute line, when set).
type notify struct {
	msg  string
	ch   chan struct{}
	line string
}

func (notify) Enabled(context.Context, slog.Level) bool { return true }
func (n notify) Handle(_ context.Context, r slog.Record) error {
	match := r.Message == n.msg
	if match && n.line != "" {
		match = false
		r.Attrs(func(a slog.Attr) bool {
			match = match || a.Key == "line" && a.Value.String() == n.line
			return true
		})
	}
	if match {
		select {
		case n.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (n notify) WithAttrs([]slog.Attr) slog.Handler { return n }
func (n notify) WithGroup(string) slog.Handler      { return n }

// TestElicitationSuspends: for both protocols — the stateless one (an
// input_required result) and the older one (an elicitation request while
// the call is open) — the server's question suspends the call with the
// requested schema and metadata naming the server; the client is closed
// (the server stopped); a new client and runner on the same database
// refuse a bad answer, pass the good one to the server, and its result
// reaches the model. A decline reaches the server as a decline.
func TestElicitationSuspends(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) {
			ctx := context.Background()
			db := sqlitetest.Path(t)
			first := goServer(t, mcp.Config{ProtocolVersion: version})
			r1 := runner(t, first, db, scripted.Tool("srv_ask", map[string]any{}))
			_, err := r1.Create(ctx, "m1", "desk", nil)
			require.NoError(t, err)
			steps, err := drain(r1.Run(ctx, "m1", machine.UserText("go")))
			require.NoError(t, err)
			sus := steps[len(steps)-1].Suspensions
			require.Len(t, sus, 1)
			require.Equal(t, "What is your name?", sus[0].Reason)
			require.JSONEq(t, `{"type":"object","required":["name"],"properties":{"name":{"type":"string","minLength":1}}}`, string(sus[0].PayloadSchema))
			meta, err := instance.Decode[mcp.InputMetadata](sus[0].Metadata)
			require.NoError(t, err)
			require.Equal(t, "srv", meta.Server)
			require.Equal(t, "ask", meta.Tool)
			require.Equal(t, mcp.ModeForm, meta.Mode)
			if version == "" {
				require.Equal(t, "name", meta.Request)
				require.Equal(t, "opaque-42", meta.RequestState)
			} else {
				require.Equal(t, "elicitation-1", meta.Request)
			}
			// Stop the server. Close's error is the server's exit status,
			// which is SIGTERM's when it outlives its closed stdin.
			_ = first.Close()

			second := goServer(t, mcp.Config{ProtocolVersion: version})
			// The model of the answering process replies to the result.
			r2 := runner(t, second, db, scripted.Text("done"))
			_, err = resumeSteps(ctx, r2, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: map[string]any{"name": ""}})
			var pe *instance.PayloadError
			require.ErrorAs(t, err, &pe)
			_, err = resumeSteps(ctx, r2, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: map[string]any{"name": "Ada"}})
			require.NoError(t, err)
			// The SDK's shim for older clients hands the handler its
			// requestState too.
			require.Equal(t, []string{`hello Ada (state "opaque-42")`}, results(t, r2))
			m, _, err := r2.Load(ctx, "m1")
			require.NoError(t, err)
			require.Empty(t, m.Pending())
			require.Equal(t, "done", m.History()[len(m.History())-1].Text(), "the model saw the result and replied")
		})
	}
}

// TestElicitationDeclined: an error resume declines; its text "cancel"
// cancels.
func TestElicitationDeclined(t *testing.T) {
	for _, tc := range []struct{ version, text, want string }{
		{"", "not telling", "error: no name: decline"},
		{"", "cancel", "error: no name: cancel"},
		{"2025-11-25", "not telling", "error: no name: decline"},
	} {
		ctx := context.Background()
		c := goServer(t, mcp.Config{ProtocolVersion: tc.version})
		r := runner(t, c, sqlitetest.Path(t), scripted.Tool("srv_ask", map[string]any{}), scripted.Text("done"))
		_, err := r.Create(ctx, "m1", "desk", nil)
		require.NoError(t, err)
		_, err = drain(r.Run(ctx, "m1", machine.UserText("go")))
		require.NoError(t, err)
		pending, err := r.Pending(ctx, store.Filter{})
		require.NoError(t, err)
		require.Len(t, pending, 1)
		_, err = resumeSteps(ctx, r, machine.ResumeInput{SuspendID: pending[0].ID, Payload: tc.text, IsError: true})
		require.NoError(t, err)
		require.Equal(t, []string{tc.want}, results(t, r), tc)
	}
}

// TestSampling: a server's sampling request is answered with the model
// Config.Sampling names — asked in an input_required result (2026) or
// by sampling/createMessage during the call (2025-11-25, the SDK's
// shim) — and refused, an error result, without one.
func TestSampling(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		var got []*llm.Request
		model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
			got = append(got, req)
			return &llm.Response{Message: message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("short")}}, Model: "charter-model"}, nil
		})
		for _, sampling := range []llm.Model{model, nil} {
			res := call(t, goServer(t, mcp.Config{ProtocolVersion: version, Sampling: sampling}), "summarize", map[string]any{"text": "a long text"})
			if sampling == nil {
				require.True(t, strings.HasPrefix(res, "error: ") && strings.Contains(res, "sampling"), "%s: %s", version, res)
				continue
			}
			require.Equal(t, "summary by charter-model: short", res, version)
			require.Len(t, got, 1, version)
			require.Equal(t, "Summarize.", got[0].System)
			require.Equal(t, 50, got[0].Settings.MaxTokens)
			require.Equal(t, []message.Message{message.UserText("a long text")}, got[0].Messages)
		}
	}
}

// TestURLElicitationCompleted: a URL-mode request's suspension waits for
// URLEvent too; the server's notifications/elicitation/complete (sent
// while another machine calls the server) signals it through
// Config.Signaler, and the call goes on as after a resume.
func TestURLElicitationCompleted(t *testing.T) {
	ctx := context.Background()
	var sig lateSignaler
	c := goServer(t, mcp.Config{Signaler: &sig})
	db := sqlitetest.Path(t)
	r := runner(t, c, db, scripted.Tool("srv_connect", map[string]any{}), scripted.Tool("srv_consent-done", map[string]any{}),
		scripted.Text("done"), scripted.Text("done")) // m1's last reply and m2's, in either order
	sig.r.Store(r)
	_, err := r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	sus := suspended(t, r, machine.UserText("go"))
	require.Len(t, sus, 1)
	require.Equal(t, mcp.URLEvent("srv", "c1"), sus[0].Event)

	_, err = r.Create(ctx, "m2", "desk", nil)
	require.NoError(t, err)
	_, err = drain(r.Run(ctx, "m2", machine.UserText("tell")))
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		pending, err := r.Pending(ctx, store.Filter{MachineID: "m1"})
		require.NoError(t, err)
		if len(pending) == 0 || time.Now().After(deadline) {
			require.Empty(t, pending, "the completion resumed m1")
			break
		}
		time.Sleep(5 * time.Millisecond) // polling observable state, with a deadline
	}
	_ = c.Close() // waits for the signal's run (stopping the child server may report its signal)
	require.Equal(t, []string{"calendar connected: accept"}, results(t, r))
}

// lateSignaler is a Signaler whose runner is set after the client is
// made (the runner needs the client's tools).
type lateSignaler struct {
	r atomic.Pointer[durable.Runner]
}

func (s *lateSignaler) Signal(ctx context.Context, event string, payload any) (int, error) {
	return s.r.Load().Signal(ctx, event, payload)
}

// TestConfigRefused: a Config New cannot use.
func TestConfigRefused(t *testing.T) {
	for _, cfg := range []mcp.Config{
		{Name: "", Command: []string{"x"}},
		{Name: "s"},
		{Name: "s", Command: []string{"x"}, URL: "http://x"},
		{Name: "s", URL: "http://x", CallTimeout: -1},
	} {
		_, err := mcp.New(cfg)
		require.ErrorIs(t, err, mcp.ErrInvalidConfig)
	}
}

// suspended runs machine m1 of r to its suspensions and returns them.
func suspended(t *testing.T, r *durable.Runner, in machine.Input) []instance.SuspendedCall {
	t.Helper()
	steps, err := drain(r.Run(context.Background(), "m1", in))
	require.NoError(t, err)
	return steps[len(steps)-1].Suspensions
}

// TestSeveralInputRequests: a multi round-trip result with two questions
// and a roots request suspends for each question in turn (each with its
// own message and schema), answers the roots itself, and retries once
// with every answer.
func TestSeveralInputRequests(t *testing.T) {
	ctx := context.Background()
	c := goServer(t, mcp.Config{})
	r := runner(t, c, sqlitetest.Path(t), scripted.Tool("srv_two", map[string]any{}), scripted.Text("done"))
	_, err := r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	sus := suspended(t, r, machine.UserText("go"))
	require.Len(t, sus, 1)
	require.Equal(t, "First?", sus[0].Reason)
	sus = suspended(t, r, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: map[string]any{"v": "x"}})
	require.Len(t, sus, 1)
	require.Equal(t, "Second?", sus[0].Reason)
	require.Equal(t, 1, sus[0].Stage)
	meta, err := instance.Decode[mcp.InputMetadata](sus[0].Metadata)
	require.NoError(t, err)
	require.Equal(t, "b", meta.Request)
	require.Len(t, meta.Answers, 1)
	sus = suspended(t, r, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: "no", IsError: true})
	require.Empty(t, sus)
	require.Equal(t, []string{"error: a=accept/x b=decline/<nil> roots=0"}, results(t, r))
}

// TestLegacyQuestionChanges: an older server that asks something
// different when the call is replayed gets the new question asked of the
// person, never the old answer.
func TestLegacyQuestionChanges(t *testing.T) {
	ctx := context.Background()
	c := goServer(t, mcp.Config{ProtocolVersion: "2025-11-25"})
	r := runner(t, c, sqlitetest.Path(t), scripted.Tool("srv_shifty", map[string]any{}), scripted.Text("done"))
	_, err := r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	sus := suspended(t, r, machine.UserText("go"))
	require.Equal(t, "Question 1?", sus[0].Reason)
	sus = suspended(t, r, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: map[string]any{"v": "x"}})
	require.Len(t, sus, 1)
	require.Equal(t, "Question 2?", sus[0].Reason)
	meta, err := instance.Decode[mcp.InputMetadata](sus[0].Metadata)
	require.NoError(t, err)
	require.Empty(t, meta.Answers, "the answer to another question is not kept")
}

// TestPackTools: the server's tools in a pack, which every node opting
// in shares; an input request suspends and resumes as a node tool's does.
func TestPackTools(t *testing.T) {
	ctx := context.Background()
	c := goServer(t, mcp.Config{})
	tools, err := mcp.PackTools[struct{}](ctx, c)
	require.NoError(t, err)
	pack := node.NewPack("srv", "The test server's tools.", struct{}{}, tools...)
	n, err := node.New("desk", node.Config[desk]{Packs: []*node.Pack{pack}})
	require.NoError(t, err)
	model := scripted.New(scripted.Tool("srv_echo", map[string]any{"text": "p"}), scripted.Tool("srv_ask", map[string]any{}), scripted.Text("done"))
	ch, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: sqlitetest.Open(t, sqlitetest.Path(t)), Charter: ch})
	require.NoError(t, err)
	_, err = r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	sus := suspended(t, r, machine.UserText("go"))
	require.Len(t, sus, 1)
	require.Empty(t, suspended(t, r, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: map[string]any{"name": "Lin"}}))
	require.Equal(t, []string{"echo: p", `hello Lin (state "opaque-42")`}, results(t, r))
}

// TestApprove: a tool Config.Approve selects reaches the server only once
// a person approves the call; a refusal is an error result, a malformed
// answer is refused.
func TestApprove(t *testing.T) {
	ctx := context.Background()
	c := goServer(t, mcp.Config{Approve: func(t *sdk.Tool) bool { return t.Name == "echo" }})
	for _, tc := range []struct {
		answer any
		isErr  bool
		want   string
	}{
		{mcp.Approval{Approve: true}, false, "echo: x"},
		{mcp.Approval{Approve: false, Comment: "too risky"}, false, "error: the call was not approved: too risky"},
		{"no", true, "error: the call was not approved: no"},
	} {
		r := runner(t, c, sqlitetest.Path(t), scripted.Tool("srv_echo", map[string]any{"text": "x"}), scripted.Text("done"))
		_, err := r.Create(ctx, "m1", "desk", nil)
		require.NoError(t, err)
		sus := suspended(t, r, machine.UserText("go"))
		require.Len(t, sus, 1)
		require.Equal(t, `Call echo of srv with {"text":"x"}?`, sus[0].Reason)
		_, err = resumeSteps(ctx, r, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: map[string]any{"approve": "yes"}})
		var pe *instance.PayloadError
		require.ErrorAs(t, err, &pe)
		require.Empty(t, suspended(t, r, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: tc.answer, IsError: tc.isErr}))
		require.Equal(t, []string{tc.want}, results(t, r))
	}
	// A tool Approve does not select is called straight away.
	require.Equal(t, "error: the ledger is closed", call(t, c, "fail", map[string]any{}))
}

// TestURLElicitation: a URL-mode request suspends with the URL in the
// metadata and no payload schema; a resume says the flow is done.
func TestURLElicitation(t *testing.T) {
	ctx := context.Background()
	c := goServer(t, mcp.Config{})
	r := runner(t, c, sqlitetest.Path(t), scripted.Tool("srv_connect", map[string]any{}), scripted.Text("done"))
	_, err := r.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	sus := suspended(t, r, machine.UserText("go"))
	require.Len(t, sus, 1)
	require.Equal(t, "Grant calendar access", sus[0].Reason)
	require.Empty(t, sus[0].PayloadSchema)
	meta, err := instance.Decode[mcp.InputMetadata](sus[0].Metadata)
	require.NoError(t, err)
	require.Equal(t, mcp.ModeURL, meta.Mode)
	require.Equal(t, "https://calendar.example.com/consent?state=c1", meta.URL)
	require.Equal(t, "c1", meta.ElicitationID)
	require.Empty(t, suspended(t, r, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: "done"}))
	require.Equal(t, []string{"calendar connected: accept"}, results(t, r))
}
