package openai_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/openai"
	"github.com/markov-agents/markov/message"
)

func Example() {
	// A stand-in for an OpenAI-compatible server such as Ollama
	// ("http://localhost:11434/v1/"); for OpenAI itself leave BaseURL empty
	// and set OPENAI_API_KEY (or Config.APIKey).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1741570340, "model": "llama3.2",
			"choices": [{"index": 0, "finish_reason": "stop",
				"message": {"role": "assistant", "content": "Paris."}}],
			"usage": {"prompt_tokens": 14, "completion_tokens": 3, "total_tokens": 17}
		}`)
	}))
	defer srv.Close()

	model, err := openai.New(openai.Config{
		BaseURL:           srv.URL + "/v1/",
		IgnoreEnvironment: true,
		DefaultSettings:   llm.Settings{Model: "llama3.2", MaxTokens: 256},
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
