package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// Prepare checks req ([llm.CheckRequest]) and maps it onto the provider's
// call with params; errors are prefixed with the provider's name.
func Prepare[P any](provider string, req *llm.Request, params func(*llm.Request) (P, error)) (P, error) {
	var zero P
	if err := llm.CheckRequest(req); err != nil {
		return zero, fmt.Errorf("%s: %w", provider, err)
	}
	p, err := params(req)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", provider, err)
	}
	return p, nil
}

// Settings merges over onto defaults ([llm.Settings.Merge]) and checks that
// the result names a model and no negative token limit.
func Settings(defaults, over llm.Settings) (llm.Settings, error) {
	s := defaults.Merge(over)
	if s.Model == "" {
		return s, errors.New("no model set: set Config.DefaultSettings.Model or the request's Settings.Model")
	}
	if s.MaxTokens < 0 {
		return s, fmt.Errorf("max tokens must not be negative, got %d", s.MaxTokens)
	}
	return s, nil
}

// PartText is the text a text or structured part contributes (a
// structured part without text contributes its JSON); "" for other parts.
func PartText(p message.Part) string {
	switch p.Kind {
	case message.KindText:
		return p.Text
	case message.KindStructured:
		if p.Text != "" {
			return p.Text
		}
		return string(p.Data)
	}
	return ""
}

// ToolResults returns the tool results of msgs[i], a Tool message, in the
// order of the tool uses of msgs[i-1] they answer (the transcript has passed
// [llm.CheckPairing]).
func ToolResults(msgs []message.Message, i int) []message.Part {
	if i == 0 {
		return nil
	}
	results := make(map[string]message.Part)
	for _, p := range msgs[i].Parts {
		if p.Kind == message.KindToolResult {
			results[p.ID] = p
		}
	}
	var out []message.Part
	for _, u := range msgs[i-1].ToolUses() {
		if r, ok := results[u.ID]; ok {
			out = append(out, r)
		}
	}
	return out
}

// ReplyText maps a text of the model's reply: a [message.Structured] part
// when the request asked for structured output and the text is JSON, a
// text part otherwise.
func ReplyText(text string, structured bool) message.Part {
	if t := strings.TrimSpace(text); structured && json.Valid([]byte(t)) {
		return message.Structured(json.RawMessage(t), text)
	}
	return message.Text(text)
}

// Stream returns the chunks of one streamed call: req is checked and mapped
// as by [Prepare], then call yields the chunks of the call (see [Chunks]);
// structured says whether req asked for structured output.
func Stream[P any](ctx context.Context, provider string, req *llm.Request, params func(*llm.Request) (P, error),
	call func(ctx context.Context, p P, structured bool, yield func(llm.Chunk, error) bool) error) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		p, err := Prepare(provider, req, params)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		Chunks(provider, func(yield func(llm.Chunk, error) bool) error {
			return call(ctx, p, req.Output != nil, yield)
		})(yield)
	}
}

// Chunks returns the chunks stream yields; the error stream returns (nil
// when the reply is complete or the caller stopped) is yielded last,
// prefixed with the provider's name.
func Chunks(provider string, stream func(yield func(llm.Chunk, error) bool) error) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if err := stream(yield); err != nil {
			yield(llm.Chunk{}, fmt.Errorf("%s: %w", provider, err))
		}
	}
}
