package anthropic_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/anthropic"
	"github.com/markov-agents/markov/message"
)

func Example() {
	// A stand-in for api.anthropic.com; in production leave BaseURL empty
	// and set ANTHROPIC_API_KEY (or Config.APIKey).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{
			"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": [{"type": "text", "text": "Paris."}],
			"stop_reason": "end_turn",
			"usage": {"input_tokens": 14, "output_tokens": 3}
		}`)
	}))
	defer srv.Close()

	model, err := anthropic.New(anthropic.Config{
		APIKey:            "sk-ant-example",
		BaseURL:           srv.URL,
		IgnoreEnvironment: true,
		DefaultSettings:   llm.Settings{Model: "claude-sonnet-4-5", MaxTokens: 1024},
	})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := model.Generate(context.Background(), &llm.Request{
		System:   "Answer in one word.",
		Messages: []message.Message{message.UserText("What is the capital of France?")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Message.Text())
	fmt.Println(resp.StopReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// Paris.
	// end_turn 14 3
}
