package mcp

// This file answers a server's sampling requests (sampling/createMessage)
// with the model Config.Sampling names, when one does.

import (
	"cmp"
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// sampleLegacy answers the sampling/createMessage request a server of
// an older protocol sends during a call.
func (c *Client) sampleLegacy(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
	p := req.Params
	msgs := make([]*sdk.SamplingMessageV2, 0, len(p.Messages))
	for _, m := range p.Messages {
		msgs = append(msgs, &sdk.SamplingMessageV2{Role: m.Role, Content: []sdk.Content{m.Content}})
	}
	return c.sample(ctx, &sdk.CreateMessageWithToolsParams{MaxTokens: p.MaxTokens, Messages: msgs,
		SystemPrompt: p.SystemPrompt, Temperature: p.Temperature})
}

// sample answers sampling request p with the Sampling model: its
// messages (text only) and system prompt become the model's request, and
// the model's text is the result. A request with tools, or with content
// other than text, is refused.
func (c *Client) sample(ctx context.Context, p *sdk.CreateMessageWithToolsParams) (*sdk.CreateMessageResult, error) {
	if c.cfg.Sampling == nil {
		return nil, fmt.Errorf("%w: %s asks for sampling, which this client does not offer (Config.Sampling)", ErrServer, c.cfg.Name)
	}
	if len(p.Tools) > 0 {
		return nil, fmt.Errorf("%w: %s: sampling with tools is not offered", ErrServer, c.cfg.Name)
	}
	req := &llm.Request{System: p.SystemPrompt, Settings: llm.Settings{MaxTokens: int(p.MaxTokens)}}
	if p.Temperature != 0 {
		req.Settings.Temperature = &p.Temperature
	}
	for i, m := range p.Messages {
		msg := message.Message{Role: message.User}
		if m.Role == "assistant" {
			msg.Role = message.Assistant
		}
		for _, part := range m.Content {
			t, ok := part.(*sdk.TextContent)
			if !ok {
				return nil, fmt.Errorf("%w: %s: sampling message %d: %T content is not offered, only text", ErrServer, c.cfg.Name, i, part)
			}
			msg.Parts = append(msg.Parts, message.Text(t.Text))
		}
		req.Messages = append(req.Messages, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	resp, err := c.cfg.Sampling.Generate(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("sampling: %w", err)
	}
	c.log.Info("mcp: answered a sampling request", "messages", len(req.Messages))
	return &sdk.CreateMessageResult{Role: "assistant", Content: &sdk.TextContent{Text: resp.Message.Text()},
		Model: cmp.Or(resp.Model, "markov"), StopReason: "endTurn"}, nil
}
