package acp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/markov-agents/markov/acp"
	"github.com/markov-agents/markov/acp/acpdemo"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/store/memstore"
)

// printer is an ACP client that notes the agent's tool calls, the
// permissions it allows (every one it is asked for) and the agent's
// messages, each in a list of its own: the client connection handles
// notifications and requests concurrently, so a permission request may
// reach it before the tool call's notification.
type printer struct {
	client
	mu                 sync.Mutex
	tools, asks, reply strings.Builder
}

func (p *printer) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch u := n.Update; {
	case u.AgentMessageChunk != nil:
		p.reply.WriteString(u.AgentMessageChunk.Content.Text.Text)
	case u.ToolCall != nil:
		fmt.Fprintf(&p.tools, "[%s]\n", u.ToolCall.Title)
	}
	return nil
}

func (p *printer) RequestPermission(_ context.Context, r acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	p.mu.Lock()
	fmt.Fprintf(&p.asks, "(allowed: %s)\n", r.ToolCall.Content[0].Content.Content.Text.Text)
	p.mu.Unlock()
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(acp.OptionAllow)}, nil
}

// String returns the tool calls, the permissions allowed and the reply.
func (p *printer) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools.String() + p.asks.String() + p.reply.String()
}

// ExampleAgent_Serve serves the ACP demo's charter to a client over a
// pair of pipes (an editor would use the agent's stdin and stdout): the
// client opens a session and asks for a deploy, which waits for a yes —
// a permission request — and goes on once allowed.
func ExampleAgent_Serve() {
	ctx := context.Background()
	charter, _ := acpdemo.NewCharter(acpdemo.ScriptedModel())
	runner, _ := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	agent, err := acp.New(acp.Config{Runner: runner, Node: acpdemo.NodeName})
	if err != nil {
		panic(err)
	}
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- agent.Serve(ctx, agentIn, agentOut) }()

	p := &printer{}
	conn := acpsdk.NewClientSideConnection(p, clientOut, clientIn)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	if _, err := conn.Initialize(ctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber}); err != nil {
		panic(err)
	}
	s, err := conn.NewSession(ctx, acpsdk.NewSessionRequest{Cwd: "/", McpServers: []acpsdk.McpServer{}})
	if err != nil {
		panic(err)
	}
	resp, err := conn.Prompt(ctx, acpsdk.PromptRequest{SessionId: s.SessionId, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("deploy api")}})
	if err != nil {
		panic(err)
	}
	fmt.Println(p)
	fmt.Println("stop:", resp.StopReason)
	clientOut.Close()
	fmt.Println("served:", <-served)
	// Output:
	// [deploy]
	// (allowed: deploy api?)
	// Done: api deployed
	// stop: end_turn
	// served: <nil>
}
