package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/internal/testkit"
)

// childEnv makes the test binary an MCP server over stdio (see serve).
const childEnv = "MARKOV_MCP_CHILD"

func TestMain(m *testing.M) { testkit.Main(m, childEnv, child) }

// child runs the role a child process is given: "serve", or a step of
// TestEverythingElicitationAcrossProcesses ("ask DB", "answer DB ID").
func child(role string) int {
	if role == "serve" {
		return serve()
	}
	return everythingChild(strings.Fields(role))
}

type textIn struct {
	Text string `json:"text"`
}

// serve runs the test server over stdio.
func serve() int {
	if err := testServer().Run(context.Background(), &notifying{Transport: &sdk.StdioTransport{}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// notifier is the connection of the test server over stdio, for the
// notification the SDK's server has no method for
// (notifications/elicitation/complete); nil in process.
var notifier atomic.Pointer[sdk.Connection]

// notifying is a transport whose connection is the notifier.
type notifying struct{ sdk.Transport }

func (n *notifying) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := n.Transport.Connect(ctx)
	if err == nil {
		notifier.Store(&c)
	}
	return c, err
}

// testServer returns the Go SDK's server with the tools the tests call,
// each playing one behaviour of a server: answers, input requests,
// failures and faults.
func testServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "testserver", Version: "1"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		return text("echo: " + in.Text), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Description: "Ask the person their name."}, func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		r, ok := req.Params.InputResponses["name"].(*sdk.ElicitResult)
		if !ok {
			return &sdk.CallToolResult{RequestState: "opaque-42", InputRequests: sdk.InputRequestMap{"name": &sdk.ElicitParams{
				Message: "What is your name?",
				RequestedSchema: &jsonschema.Schema{Type: "object", Required: []string{"name"},
					Properties: map[string]*jsonschema.Schema{"name": {Type: "string", MinLength: new(1)}}},
			}}}, nil, nil
		}
		if r.Action != "accept" {
			return text("no name: " + r.Action), nil, nil
		}
		return text(fmt.Sprintf("hello %v (state %q)", r.Content["name"], req.Params.RequestState)), nil, nil
	})
	form := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"v": {Type: "string"}}}
	sdk.AddTool(s, &sdk.Tool{Name: "two", Description: "Ask two questions and list the roots."}, func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		a, ok := req.Params.InputResponses["a"].(*sdk.ElicitResult)
		if !ok {
			return &sdk.CallToolResult{RequestState: "s2", InputRequests: sdk.InputRequestMap{
				"a": &sdk.ElicitParams{Message: "First?", RequestedSchema: form},
				"b": &sdk.ElicitParams{Message: "Second?", RequestedSchema: form},
				"r": &sdk.ListRootsParams{},
			}}, nil, nil
		}
		b := req.Params.InputResponses["b"].(*sdk.ElicitResult)
		roots := req.Params.InputResponses["r"].(*sdk.ListRootsResult)
		return text(fmt.Sprintf("a=%v/%v b=%v/%v roots=%d", a.Action, a.Content["v"], b.Action, b.Content["v"], len(roots.Roots))), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "summarize", Description: "Summarize the text with the client's model."}, func(_ context.Context, req *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["s"].(*sdk.CreateMessageWithToolsResult); ok && len(r.Content) == 1 {
			if t, ok := r.Content[0].(*sdk.TextContent); ok {
				return text(fmt.Sprintf("summary by %s: %s", r.Model, t.Text)), nil, nil
			}
		}
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"s": &sdk.CreateMessageParams{SystemPrompt: "Summarize.", MaxTokens: 50,
			Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Text}}}}}}, nil, nil
	})
	var asked atomic.Int32
	sdk.AddTool(s, &sdk.Tool{Name: "shifty", Description: "Ask a question that is new each time."}, func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["q"].(*sdk.ElicitResult); ok {
			return text("answered: " + r.Action), nil, nil
		}
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{
			"q": &sdk.ElicitParams{Message: fmt.Sprintf("Question %d?", asked.Add(1)), RequestedSchema: form},
		}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "connect", Description: "Connect a calendar in the browser."}, func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["consent"].(*sdk.ElicitResult); ok {
			return text("calendar connected: " + r.Action), nil, nil
		}
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"consent": &sdk.ElicitParams{
			Mode: "url", Message: "Grant calendar access", URL: "https://calendar.example.com/consent?state=c1", ElicitationID: "c1",
		}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "consent-done", Description: "Say the calendar consent c1 is given."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		c := notifier.Load()
		if c == nil {
			return nil, nil, errors.New("no connection to notify on")
		}
		err := (*c).Write(ctx, &jsonrpc.Request{Method: "notifications/elicitation/complete", Params: json.RawMessage(`{"elicitationId":"c1"}`)})
		return text("notified"), nil, err
	})
	sdk.AddTool(s, &sdk.Tool{Name: "hugeform"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"f": &sdk.ElicitParams{
			Message: "Fill this in", RequestedSchema: &jsonschema.Schema{Type: "object", Description: strings.Repeat("d", 70<<10)},
		}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("the ledger is closed")
	})
	sdk.AddTool(s, &sdk.Tool{Name: "links"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///r.txt", Name: "r.txt"}}}, map[string]int{"n": 2}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "big"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return text(strings.Repeat("x", 2<<20)), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "exit"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "exiting on request")
		os.Exit(3)
		return nil, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "hang"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		select {}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "garbage"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		fmt.Fprintln(os.Stdout, `this is not JSON-RPC`)
		select {}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "truncated"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		fmt.Fprint(os.Stdout, `{"jsonrpc":"2.0","id":`)
		select {}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "withdraw"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		s.RemoveTools("echo")
		return text("echo withdrawn"), nil, nil
	})
	return s
}
