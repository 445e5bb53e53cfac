package mcp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/mcp"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
	"github.com/markov-agents/markov/store/memstore"
)

// A payments MCP server whose pay tool asks for an approval before it
// pays (an elicitation): mounted in a node, the model's call suspends the
// machine; a manager's answer, hours later and from any process sharing
// the store, goes back to the server, and its result reaches the model.
func ExampleTools() {
	// The payments server (over Streamable HTTP; any MCP server will do).
	payments := sdk.NewServer(&sdk.Implementation{Name: "payments", Version: "1"}, nil)
	type payIn struct {
		To     string `json:"to"`
		Amount int    `json:"amount"`
	}
	sdk.AddTool(payments, &sdk.Tool{Name: "pay", Description: "Pay an amount."}, func(_ context.Context, req *sdk.CallToolRequest, in payIn) (*sdk.CallToolResult, any, error) {
		answer, ok := req.Params.InputResponses["approval"].(*sdk.ElicitResult)
		if !ok {
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"approval": &sdk.ElicitParams{
				Message: fmt.Sprintf("Approve paying %d EUR to %s?", in.Amount, in.To),
				RequestedSchema: &jsonschema.Schema{Type: "object", Required: []string{"approve"},
					Properties: map[string]*jsonschema.Schema{"approve": {Type: "boolean"}}},
			}}}, nil, nil
		}
		text := "payment refused by the approver"
		if answer.Action == "accept" && answer.Content["approve"] == true {
			text = fmt.Sprintf("paid %d EUR to %s", in.Amount, in.To)
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return payments }, &sdk.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()

	// The agent: a node with the server's tools.
	ctx := context.Background()
	client, err := mcp.New(mcp.Config{Name: "payments", URL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	tools, err := mcp.Tools[struct{}](ctx, client)
	if err != nil {
		log.Fatal(err)
	}
	desk, err := node.New("desk", node.Config[struct{}]{Tools: tools})
	if err != nil {
		log.Fatal(err)
	}
	model := scripted.New(scripted.Tool("payments_pay", map[string]any{"to": "ACME", "amount": 120}), scripted.Text("Done: paid."))
	charter, err := machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{desk}})
	if err != nil {
		log.Fatal(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := runner.Create(ctx, "case-1", "desk", nil); err != nil {
		log.Fatal(err)
	}
	for _, err := range runner.Run(ctx, "case-1", machine.UserText("Pay ACME's invoice.")) {
		if err != nil {
			log.Fatal(err)
		}
	}

	// The approver's inbox: the pending approval, with the server's form.
	pending, err := runner.Pending(ctx, store.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	call, err := runner.Call(ctx, pending[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("asks:", call.Reason)
	fmt.Println("form:", string(call.PayloadSchema))

	// The manager approves.
	run, err := runner.Resume(ctx, machine.ResumeInput{SuspendID: call.SuspendID, Payload: map[string]any{"approve": true}})
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range run.Steps() {
		if err != nil {
			log.Fatal(err)
		}
	}
	m, _, err := runner.Load(ctx, "case-1")
	if err != nil {
		log.Fatal(err)
	}
	h := m.History()
	fmt.Println("tool result:", h[len(h)-2].Parts[0].Text)
	fmt.Println("model:", h[len(h)-1].Text())
	// Output:
	// asks: Approve paying 120 EUR to ACME?
	// form: {"type":"object","properties":{"approve":{"type":"boolean"}},"required":["approve"]}
	// tool result: paid 120 EUR to ACME
	// model: Done: paid.
}
