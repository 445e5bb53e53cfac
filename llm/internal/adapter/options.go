// Package adapter is the plumbing the provider adapters share (llm/anthropic,
// llm/openai): the request options built from their connection settings,
// the settings and request checks, and the mapping of tool results and text
// parts. Their SDKs are generated from one template and take the same
// options under different types.
package adapter

import (
	"fmt"
	"net/http"

	"github.com/markov-agents/markov/llm"
)

// Conn is the part of an adapter's Config every adapter has.
type Conn struct {
	// Provider prefixes error messages ("anthropic", "openai").
	Provider   string
	APIKey     string
	BaseURL    string
	HTTPClient *http.Client
	MaxRetries *int
	// MaxTokens is the configured default completion limit; only checked.
	MaxTokens int
}

// Setters are one SDK's option constructors.
type Setters[O any] struct {
	APIKey     func(string) O
	BaseURL    func(string) O
	HTTPClient func(*http.Client) O
	MaxRetries func(int) O
}

// Options checks c and returns the options for the fields c sets, in a fixed
// order, followed by extra (which therefore take precedence).
func Options[O any](c Conn, s Setters[O], extra ...O) ([]O, error) {
	if c.MaxRetries != nil && *c.MaxRetries < 0 {
		return nil, fmt.Errorf("%s: %w: MaxRetries must not be negative, got %d", c.Provider, llm.ErrInvalidConfig, *c.MaxRetries)
	}
	if c.MaxTokens < 0 {
		return nil, fmt.Errorf("%s: %w: DefaultSettings.MaxTokens must not be negative, got %d", c.Provider, llm.ErrInvalidConfig, c.MaxTokens)
	}
	var opts []O
	if c.APIKey != "" {
		opts = append(opts, s.APIKey(c.APIKey))
	}
	if c.BaseURL != "" {
		opts = append(opts, s.BaseURL(c.BaseURL))
	}
	if c.HTTPClient != nil {
		opts = append(opts, s.HTTPClient(c.HTTPClient))
	}
	if c.MaxRetries != nil {
		opts = append(opts, s.MaxRetries(*c.MaxRetries))
	}
	return append(opts, extra...), nil
}
