package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/acp"
	"github.com/markov-agents/markov/acp/acpdemo"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/machine"
)

// TestServeAnswersRequestsSentBeforeItStarts: a client that writes its
// requests without waiting for the agent — here, before Serve is even
// called — has them served: session/load replays the session's history
// with session/update notifications from the first request on. The
// agent's connection reads the client at once, and the requests it
// handles must find the agent ready: under -race, a handler that could
// run before Serve set the agent up is reported (in some of the 20
// connections, as the scheduler goes; before the fix, the replay could
// also panic on the connection not set yet).
func TestServeAnswersRequestsSentBeforeItStarts(t *testing.T) {
	ctx := context.Background()
	runner := deskRunner(t, stores["memstore"](t))
	id, err := runner.Create(ctx, "", acpdemo.NodeName, nil)
	require.NoError(t, err)
	_, err = testkit.Collect(runner.Run(ctx, id, machine.UserText("hello")))
	require.NoError(t, err)
	agent, err := acp.New(acp.Config{Runner: runner, Node: acpdemo.NodeName})
	require.NoError(t, err)
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) { loadPipelined(t, agent, id) })
	}
}

// loadPipelined serves agent to a client that sends initialize and
// session/load of session id at once, and checks the replay.
func loadPipelined(t *testing.T, agent *acp.Agent, id string) {
	ctx := context.Background()
	requests := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":%q,"cwd":"/","mcpServers":[]}}
`, id)
	hangUp, clientOut := io.Pipe() // the client hangs up when the test ends
	agentOut, clientIn := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- agent.Serve(ctx, io.MultiReader(strings.NewReader(requests), hangUp), clientIn) }()
	t.Cleanup(func() {
		_ = clientOut.Close()
		require.NoError(t, <-served)
		_ = clientIn.Close()
	})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(agentOut)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var updates []string
	deadline := time.After(10 * time.Second)
	for {
		var line string
		select {
		case line = <-lines:
		case <-deadline:
			t.Fatalf("no answer to session/load; updates: %q", updates)
		}
		var msg struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Error  json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &msg), line)
		require.Empty(t, msg.Error, line)
		if msg.Method == "session/update" {
			updates = append(updates, line)
		}
		if msg.ID != nil && *msg.ID == 2 {
			break
		}
	}
	go func() {
		for range lines {
		}
	}()
	require.Len(t, updates, 2, "the user's message and the agent's reply")
	require.Contains(t, updates[1], "You said: hello")
}
