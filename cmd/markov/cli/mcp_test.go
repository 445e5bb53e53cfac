package cli

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/examples/approval/refund"
	"github.com/markov-agents/markov/mcp"
)

// markov mcp serves the charter on the CLI's stdin and stdout: the refund
// demo's first message asks for an approval.
func TestMCPStdio(t *testing.T) {
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	c := &CLI{Charter: refundCharter(t), Node: refund.NodeName, Stdin: serverIn, Stdout: serverOut, Stderr: io.Discard,
		Getenv: func(k string) string { return map[string]string{"MARKOV_MCP_SECRET": strings.Repeat("s", 32)}[k] }}
	done := make(chan error, 1)
	go func() {
		done <- c.Run(context.Background(), []string{"mcp", "--db", filepath.Join(t.TempDir(), "mcp.db"), "--sweep", "0"})
	}()

	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true}})
	cs, err := client.Connect(t.Context(), &sdk.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	require.NoError(t, err)
	tools, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Equal(t, mcp.ConversationTool, tools.Tools[len(tools.Tools)-1].Name)
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: mcp.ConversationTool, Arguments: map[string]any{"message": "hello", "conversation": "k"}})
	require.NoError(t, err)
	require.True(t, res.NeedsInput(), "the refund demo asks for an approval")
	require.Len(t, res.InputRequests, 1)
	require.NotEmpty(t, res.RequestState)
	require.NoError(t, cs.Close())
	require.NoError(t, <-done, "markov mcp ends when the client closes stdin")
}

func TestMCPFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "mcp.db")
	c := &CLI{Charter: refundCharter(t), Getenv: func(k string) string { return map[string]string{"S": "short"}[k] }, Stderr: io.Discard}
	err := c.Run(context.Background(), []string{"mcp", "--db", db, "--secret-env", "S", "--node", refund.NodeName})
	require.EqualError(t, err, "$S: 5 bytes, want at least 32 (for example: openssl rand -hex 32)")
	err = c.Run(context.Background(), []string{"mcp", "--db", db})
	require.EqualError(t, err, "--node is required")
	err = c.Run(context.Background(), []string{"mcp", "--db", db, "--node", refund.NodeName, "--poll-interval", "-1s"})
	require.ErrorContains(t, err, "--poll-interval")
	err = c.Run(context.Background(), []string{"mcp", "--db", db, "--node", "nowhere"})
	require.ErrorIs(t, err, mcp.ErrInvalidConfig)
	require.ErrorContains(t, err, `Node "nowhere" is not a node of charter`)
	// A server that cannot start says why (its error was once swallowed as
	// if a signal had stopped it).
	err = c.Run(context.Background(), []string{"mcp", "--db", db, "--node", refund.NodeName, "--http", "127.0.0.1:-1"})
	require.ErrorContains(t, err, "invalid port")
}
