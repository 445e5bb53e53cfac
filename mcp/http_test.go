package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/store/sqlite/sqlitetest"
)

// TestStreamableHTTP: a server over Streamable HTTP in the SDK's
// stateless mode, behind a bearer token and a header: a call, and an
// input request answered by a runner with a new client.
func TestStreamableHTTP(t *testing.T) {
	srv := testServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Tenant") != "acme" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	newClient := func(bearer string) *mcp.Client {
		c, err := mcp.New(mcp.Config{Name: "srv", URL: ts.URL, Bearer: bearer, Header: http.Header{"X-Tenant": {"acme"}}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	_, err := mcp.Tools[desk](context.Background(), newClient("wrong"))
	require.ErrorIs(t, err, mcp.ErrServer)

	require.Equal(t, "echo: over http", call(t, newClient("s3cret"), "echo", map[string]any{"text": "over http"}))

	ctx := context.Background()
	db := sqlitetest.Path(t)
	r1 := runner(t, newClient("s3cret"), db, scripted.Tool("srv_ask", map[string]any{}), scripted.Text("done"))
	_, err = r1.Create(ctx, "m1", "desk", nil)
	require.NoError(t, err)
	steps, err := drain(r1.Run(ctx, "m1", machine.UserText("go")))
	require.NoError(t, err)
	sus := steps[len(steps)-1].Suspensions
	require.Len(t, sus, 1)
	meta, err := instance.Decode[mcp.InputMetadata](sus[0].Metadata)
	require.NoError(t, err)
	require.Equal(t, "opaque-42", meta.RequestState)

	r2 := runner(t, newClient("s3cret"), db, scripted.Text("done"))
	_, err = resumeSteps(ctx, r2, machine.ResumeInput{SuspendID: sus[0].SuspendID, Payload: map[string]any{"name": "Grace"}})
	require.NoError(t, err)
	require.Equal(t, []string{`hello Grace (state "opaque-42")`}, results(t, r2))
}
