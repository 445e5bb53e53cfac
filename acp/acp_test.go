package acp_test

import (
	"slices"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/acp"
	"github.com/markov-agents/markov/acp/acpdemo"
)

func TestInitializeDeclaresSuspend(t *testing.T) {
	h := serve(t, deskRunner(t, stores["memstore"](t)), acpdemo.NodeName)
	resp, err := h.conn.Initialize(h.ctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber})
	require.NoError(t, err)
	require.True(t, resp.AgentCapabilities.LoadSession)
	require.NotNil(t, resp.AgentCapabilities.SessionCapabilities.Resume)
	require.Equal(t, true, resp.AgentCapabilities.Meta["supportsSuspend"])
	require.Equal(t, true, resp.AgentCapabilities.Meta["supportsAwaitResumption"])
	require.Len(t, resp.AgentCapabilities.Meta["resumeCauses"], 4)
	require.Equal(t, acpdemo.CharterName, resp.AgentInfo.Name)
}

func TestPromptStreamsChunks(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			h := serve(t, deskRunner(t, open(t)), acpdemo.NodeName)
			id := h.newSession()
			require.Equal(t, acpsdk.StopReasonEndTurn, h.prompt(id, "hello there"))
			lines := h.cl.take()
			require.Equal(t, "You said: hello there. That is all I have to say about it.", text(lines))
			require.Greater(t, len(lines), 5, "the reply comes in chunks")
			require.Empty(t, kinds(lines))
		})
	}
}

func TestPermissionAllowAndDeny(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			h := serve(t, deskRunner(t, open(t)), acpdemo.NodeName)
			id := h.newSession()
			h.cl.answers = []string{acp.OptionAllow, acp.OptionDeny}
			require.Equal(t, acpsdk.StopReasonEndTurn, h.prompt(id, "deploy api"))
			lines := h.cl.take()
			// The client handles the permission request and the session
			// updates on goroutines of their own, so only the updates'
			// order among themselves is the agent's.
			got := kinds(lines)
			require.Contains(t, got, "permission deploy -> allow")
			require.Equal(t, []string{
				"tool_call deploy in_progress",
				"tool_call_update pending",
				"tool_call_update completed",
			}, slices.DeleteFunc(got, func(k string) bool { return k == "permission deploy -> allow" }))
			require.Equal(t, "Done: api deployed", text(lines))

			require.Equal(t, acpsdk.StopReasonEndTurn, h.prompt(id, "refund 42"))
			lines = h.cl.take()
			require.Equal(t, "Done: refund of order 42 declined by gotest", text(lines))
			require.Contains(t, kinds(lines), "permission refund -> deny")

			m, _, err := h.runner.Load(h.ctx, id)
			require.NoError(t, err)
			require.Equal(t, acpdemo.Desk{Deployed: []string{"api"}}, m.Root().State)
		})
	}
}

func TestPendingToolCallResumedWithInput(t *testing.T) {
	h := serve(t, deskRunner(t, stores["sqlite"](t)), acpdemo.NodeName)
	id := h.newSession()
	require.Equal(t, acpsdk.StopReasonEndTurn, h.prompt(id, "ask what color?"))
	require.Equal(t, []string{"tool_call ask in_progress", "tool_call_update pending"}, kinds(h.cl.take()))
	m, _, err := h.runner.Load(h.ctx, id)
	require.NoError(t, err)
	pending := m.Pending()
	require.Len(t, pending, 1)

	var resp acp.ResumeResponse
	require.NoError(t, h.call(acp.MethodResume, map[string]any{
		"sessionId": id, "handle": pending[0].SuspendID, "input": map[string]any{"text": "blue"},
	}, &resp))
	require.Equal(t, acpsdk.StopReasonEndTurn, resp.StopReason)
	lines := h.cl.take()
	require.Equal(t, []string{"tool_call_update completed"}, kinds(lines))
	require.Equal(t, `Done: the answer to "what color?" is "blue"`, text(lines))

	// A payload its schema refuses changes nothing.
	err = h.call(acp.MethodResume, map[string]any{"sessionId": id, "handle": pending[0].SuspendID, "input": 7}, nil)
	require.Error(t, err)
}

func TestLoadReplaysHistory(t *testing.T) {
	st := stores["sqlite"](t)
	runner := deskRunner(t, st)
	h := serve(t, runner, acpdemo.NodeName)
	id := h.newSession()
	h.cl.answers = []string{acp.OptionAllow}
	h.prompt(id, "deploy web")
	h.prompt(id, "ask why?")
	h.cl.take()

	h2 := serve(t, runner, acpdemo.NodeName)
	_, err := h2.conn.LoadSession(h2.ctx, acpsdk.LoadSessionRequest{SessionId: acpsdk.SessionId(id), Cwd: "/", McpServers: []acpsdk.McpServer{}})
	require.NoError(t, err)
	lines := h2.cl.take()
	require.Equal(t, []string{
		"user: deploy web",
		"tool_call deploy in_progress",
		"tool_call_update completed",
		"agent: Done: web deployed",
		"user: ask why?",
		"tool_call ask in_progress",
		"tool_call_update pending",
	}, lines)

	_, err = h2.conn.LoadSession(h2.ctx, acpsdk.LoadSessionRequest{SessionId: "nope", Cwd: "/", McpServers: []acpsdk.McpServer{}})
	require.Error(t, err)
}
