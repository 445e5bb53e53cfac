package mcp_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/memstore"
)

// A charter whose refund tool waits for a manager, served to MCP
// clients over stateless Streamable HTTP: the call that suspends answers
// input_required, and the client's retry with the manager's answer gets
// the run's answer. (The Go SDK's client makes the retry itself, from its
// elicitation handler.)
func ExampleNewServer() {
	type order struct {
		ID string `json:"id"`
	}
	type approval struct {
		Approved bool `json:"approved"`
	}
	refund := node.NewTool("refund", "Refund an order, once a manager approves.",
		func(ctx *node.ToolContext[struct{}], in order) (string, error) {
			return "", ctx.Suspend("Refund order " + in.ID + "?")
		},
		node.OnResume(func(_ *node.ToolContext[struct{}], in order, r node.Resumed[approval]) (string, error) {
			if !r.Payload.Approved {
				return "refund refused", nil
			}
			return "order " + in.ID + " refunded", nil
		}))
	desk, err := node.New("desk", node.Config[struct{}]{Tools: []node.Tool[struct{}]{refund}})
	if err != nil {
		log.Fatal(err)
	}
	model := scripted.New(scripted.Tool("refund", order{ID: "42"}), scripted.Text("Done: order 42 refunded."))
	charter, err := machine.NewCharter(machine.CharterConfig{Name: "desk", Model: model, Nodes: []*node.Node{desk}})
	if err != nil {
		log.Fatal(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := mcp.NewServer(mcp.ServerConfig{Runner: runner, Secret: []byte(strings.Repeat("s", 32)), Node: "desk"})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	// A client: its elicitation handler is the manager.
	ctx := context.Background()
	client := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			fmt.Println("asked:", req.Params.Message)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, nil
		},
	})
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ConversationTool,
		Arguments: map[string]any{"message": "Refund order 42.", "conversation": "ticket-7"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("answer:", mcp.Text(res))
	// Output:
	// asked: Refund order 42?
	// answer: Done: order 42 refunded.
}
