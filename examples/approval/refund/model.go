package refund

import (
	"fmt"
	"os"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/anthropic"
	"github.com/markov-agents/markov/llm/openai"
)

// Default model names of ModelFromEnv, overridden by MARKOV_MODEL.
const (
	DefaultAnthropicModel = "claude-sonnet-4-5"
	DefaultOpenAIModel    = "gpt-4.1-mini"
)

// ScriptedDescription is how ModelFromEnv describes the scripted model.
const ScriptedDescription = "scripted (offline; set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one)"

// maxTokens bounds the replies of a real model; the demo's are short.
const maxTokens = 1024

// ModelFromEnv picks the model the demo runs on from the environment and
// describes it in one line for the user:
//
//   - ANTHROPIC_API_KEY set: Anthropic's Messages API (llm/anthropic),
//     model DefaultAnthropicModel;
//   - else OPENAI_API_KEY set: the Chat Completions API (llm/openai), model
//     DefaultOpenAIModel, at OPENAI_BASE_URL when that is set (any
//     OpenAI-compatible server);
//   - else the deterministic ScriptedModel, offline.
//
// MARKOV_MODEL, when set, replaces the default model name of either
// provider.
func ModelFromEnv() (llm.Model, string, error) {
	return ModelFrom(os.Getenv)
}

// ModelFrom is ModelFromEnv reading the variables through getenv.
func ModelFrom(getenv func(string) string) (llm.Model, string, error) {
	override := getenv("MARKOV_MODEL")
	pick := func(def string) string {
		if override != "" {
			return override
		}
		return def
	}
	switch {
	case getenv("ANTHROPIC_API_KEY") != "":
		name := pick(DefaultAnthropicModel)
		m, err := anthropic.New(anthropic.Config{
			APIKey:          getenv("ANTHROPIC_API_KEY"),
			DefaultSettings: llm.Settings{Model: name, MaxTokens: maxTokens},
		})
		if err != nil {
			return nil, "", err
		}
		return m, fmt.Sprintf("anthropic %s (ANTHROPIC_API_KEY is set; MARKOV_MODEL overrides the model)", name), nil
	case getenv("OPENAI_API_KEY") != "":
		name := pick(DefaultOpenAIModel)
		// BaseURL is passed explicitly so that getenv decides; the adapter
		// would read OPENAI_BASE_URL (and the other OPENAI_* variables)
		// from the process environment anyway.
		m, err := openai.New(openai.Config{
			APIKey:          getenv("OPENAI_API_KEY"),
			BaseURL:         getenv("OPENAI_BASE_URL"),
			DefaultSettings: llm.Settings{Model: name, MaxTokens: maxTokens},
		})
		if err != nil {
			return nil, "", err
		}
		where := ""
		if u := getenv("OPENAI_BASE_URL"); u != "" {
			where = " at " + u
		}
		return m, fmt.Sprintf("openai %s%s (OPENAI_API_KEY is set; MARKOV_MODEL overrides the model)", name, where), nil
	}
	return ScriptedModel(), ScriptedDescription, nil
}
