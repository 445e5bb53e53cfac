package scripted_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/message"
)

func ExampleNew() {
	// Replies are played back in call order; tool-use IDs are generated
	// (toolu_1, …) unless a Call sets one.
	model := scripted.New(
		scripted.Tool("lookup_order", map[string]string{"order_id": "A-42"}),
		scripted.Text("Order A-42 has shipped."),
	)
	ctx := context.Background()
	req := &llm.Request{Messages: []message.Message{message.UserText("Where is A-42?")}}
	for range 3 {
		resp, err := model.Generate(ctx, req)
		if errors.Is(err, scripted.ErrExhausted) {
			fmt.Println("error:", err)
			break
		}
		for _, use := range resp.Message.ToolUses() {
			fmt.Printf("tool use %s: %s %s\n", use.ID, use.Name, use.Data)
		}
		fmt.Printf("text=%q stop=%s\n", resp.Message.Text(), resp.StopReason)
	}
	// The model records what it was asked, for assertions in tests.
	fmt.Println("calls:", model.Calls(), "first request:", model.Requests()[0].Messages[0].Text())
	// Output:
	// tool use toolu_1: lookup_order {"order_id":"A-42"}
	// text="" stop=tool_use
	// text="Order A-42 has shipped." stop=end_turn
	// error: scripted: no reply left (call 3)
	// calls: 3 first request: Where is A-42?
}

func ExampleByNode() {
	// Each node answers from its own script, so concurrent leaves of
	// different nodes get deterministic replies whatever order they call in.
	model := scripted.ByNode(map[string][]scripted.Reply{
		"planner": {scripted.Text("plan: research, then write")},
		"writer":  {scripted.Text("draft: markov is a state machine library")},
	})
	ctx := context.Background()
	for _, n := range []string{"writer", "planner"} {
		resp, err := model.Generate(ctx, &llm.Request{Node: n})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s\n", n, resp.Message.Text())
	}
	// Output:
	// writer: draft: markov is a state machine library
	// planner: plan: research, then write
}

func ExampleFunc() {
	// Func computes each reply from the request: here, call the tool once,
	// then answer with its result.
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == message.Tool {
			return scripted.Text("The answer is " + last.Parts[0].Text + "."), nil
		}
		return scripted.Reply{
			Text:  "Let me compute that.",
			Calls: []scripted.Call{{ID: "call-1", Name: "add", Input: `{"a":2,"b":3}`}},
		}, nil
	})
	ctx := context.Background()
	history := []message.Message{message.UserText("What is 2+3?")}
	resp, err := model.Generate(ctx, &llm.Request{Messages: history})
	if err != nil {
		panic(err)
	}
	use := resp.Message.ToolUses()[0]
	fmt.Printf("%s: %s(%s) stop=%s\n", resp.Message.Text(), use.Name, use.Data, resp.StopReason)

	history = append(history, resp.Message, message.Message{
		Role:  message.Tool,
		Parts: []message.Part{message.ToolResult(use.ID, "5", false)},
	})
	resp, err = model.Generate(ctx, &llm.Request{Messages: history})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Message.Text())
	// Output:
	// Let me compute that.: add({"a":2,"b":3}) stop=tool_use
	// The answer is 5.
}

func ExampleModel_Stream() {
	// A streamed reply comes in chunks of at most ChunkSize runes (with
	// ChunkLatency between them, zero here); the end chunk carries the
	// same reply Generate would return.
	model := scripted.New(scripted.Reply{
		Text:  "Order A-42 has shipped.",
		Calls: []scripted.Call{{ID: "toolu_1", Name: "track", Input: map[string]string{"order_id": "A-42"}}},
	}).Configure(scripted.Config{ChunkSize: 10})
	req := &llm.Request{Messages: []message.Message{message.UserText("Where is A-42?")}}
	for chunk, err := range llm.Stream(context.Background(), model, req) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch chunk.Kind {
		case llm.ChunkText:
			fmt.Printf("text %d: %q\n", chunk.Index, chunk.Text)
		case llm.ChunkToolUse:
			fmt.Printf("tool use %d: %s %s\n", chunk.Index, chunk.ID, chunk.Name)
		case llm.ChunkToolInput:
			fmt.Printf("tool input %d: %s\n", chunk.Index, chunk.Text)
		case llm.ChunkEnd:
			fmt.Printf("end: %q stop=%s\n", chunk.Response.Message.Text(), chunk.Response.StopReason)
		}
	}
	// Output:
	// text 0: "Order A-42"
	// text 0: " has shipp"
	// text 0: "ed."
	// tool use 1: toolu_1 track
	// tool input 1: {"order_id
	// tool input 1: ":"A-42"}
	// end: "Order A-42 has shipped." stop=tool_use
}
