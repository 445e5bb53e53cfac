package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// BenchmarkToolCall times one call of the test server's echo tool over
// stdio (a child process), by the Go SDK's client alone and through
// markov: a machine round whose model (a function, no latency) calls the
// mounted tool, and the round after it that ends the turn — so markov's
// figure holds two model calls, the input's validation, the result's
// conversion and the machine's bookkeeping beside the same MCP call.
func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	server := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=serve")
		return cmd
	}
	b.Run("sdk", func(b *testing.B) {
		client := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: server()}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		b.ReportAllocs()
		for b.Loop() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("markov", func(b *testing.B) {
		c, err := mcp.New(mcp.Config{Name: "srv", Command: []string{os.Args[0], "-test.run=^$"}, Env: []string{childEnv + "=serve"}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		tools, err := mcp.Tools[desk](ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		n, err := node.New("desk", node.Config[desk]{Tools: tools})
		if err != nil {
			b.Fatal(err)
		}
		// A model that keeps nothing between calls: a scripted model
		// records every request, and over b.N runs that heap made the
		// garbage collector, not markov, the larger part of the gap.
		model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
			if req.Messages[len(req.Messages)-1].Role == message.Tool {
				return &llm.Response{Message: message.Message{Role: message.Assistant, Parts: []message.Part{message.Text("done")}}, StopReason: llm.EndTurn}, nil
			}
			call := message.ToolUse("t"+strconv.Itoa(len(req.Messages)), "srv_echo", json.RawMessage(`{"text":"hi"}`))
			return &llm.Response{Message: message.Message{Role: message.Assistant, Parts: []message.Part{call}}, StopReason: llm.ToolUse}, nil
		})
		ch, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			// A machine per call: its history stays one exchange long,
			// as the SDK's call carries no conversation.
			m, err := ch.NewMachine("desk", nil)
			if err != nil {
				b.Fatal(err)
			}
			for _, err := range m.Run(ctx, machine.UserText("go")) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
