package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/errtext"
	"github.com/markov-agents/markov/node"
)

// maxRounds bounds the input_required rounds of one call that need no
// person (roots only), against a server that never stops asking.
const maxRounds = 10

// The values of InputMetadata.Mode.
const (
	ModeForm = "form"
	ModeURL  = "url"
	// ModeApproval is markov's own question before a call that
	// Config.Approve selects: the payload is an Approval.
	ModeApproval = "approval"
)

// Approval is the answer to a ModeApproval suspension.
type Approval struct {
	Approve bool   `json:"approve"`
	Comment string `json:"comment,omitempty" jsonschema:"why, for the model"`
}

// maxArgsShown is how much of a call's arguments an approval's reason
// quotes, in bytes.
const maxArgsShown = 500

// approvalSchema is the payload schema of an approval.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean"},"comment":{"type":"string"}},"required":["approve"],"additionalProperties":false}`)

// InputMetadata is the metadata of a suspension made by a server's input
// request: enough for a person to answer it, and for any process to take
// the call up again with the answer.
type InputMetadata struct {
	// Server is the server's name (Config.Name), Tool its name for the
	// tool called.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Request names the input request: its ID in a multi round-trip
	// result, or "elicitation-N" for the Nth elicitation a call of an
	// older server made.
	Request string `json:"request"`
	// Mode is ModeForm (the payload schema is the requested schema) or
	// ModeURL (the person visits URL, then resumes with any payload) or
	// ModeApproval.
	Mode          string `json:"mode"`
	Message       string `json:"message,omitempty"`
	URL           string `json:"url,omitempty"`
	ElicitationID string `json:"elicitation_id,omitempty"`
	// RequestState and InputRequests are the multi round-trip result's
	// opaque state and input requests, sent back with the answers.
	RequestState  string          `json:"request_state,omitempty"`
	InputRequests json.RawMessage `json:"input_requests,omitempty"`
	// Fingerprint identifies an older server's elicitation, so that a
	// replayed call answers only the same question.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Answers are the answers given so far in this call.
	Answers []Answer `json:"answers,omitempty"`
}

// Answer is one answer given to a server's input request.
type Answer struct {
	Request     string          `json:"request"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Result      json.RawMessage `json:"result"`
}

// Tools returns the tools of c's server as tools of nodes with state S,
// connecting and listing them first. A tool whose name or input schema
// markov cannot use is left out, with a warning in the log.
//
// The model is shown the tools as listed now; a later change to the list
// (notifications/tools/list_changed) is known to calls, so a tool the
// server withdrew is an error result, and new tools come with the next
// charter built.
func Tools[S any](ctx context.Context, c *Client) ([]node.Tool[S], error) {
	return mount(ctx, c, func(local, desc, remote string, schema json.RawMessage) node.Tool[S] {
		return node.NewTool(local, desc,
			func(ctx *node.ToolContext[S], in json.RawMessage) (string, error) {
				return c.finish(ctx.Suspend, c.first(ctx, remote, in))
			},
			node.InputSchema(schema),
			node.OnResume(func(ctx *node.ToolContext[S], in json.RawMessage, r node.Resumed[json.RawMessage]) (string, error) {
				return c.resume(ctx, ctx.Suspend, remote, in, r.Resolution)
			}))
	})
}

// PackTools is Tools for a pack with state P: a charter whose nodes opt
// into the pack (node.NewPack) all have the server's tools.
func PackTools[P any](ctx context.Context, c *Client) ([]node.PackTool[P], error) {
	return mount(ctx, c, func(local, desc, remote string, schema json.RawMessage) node.PackTool[P] {
		return node.NewPackTool(local, desc,
			func(ctx *node.PackContext[P], in json.RawMessage) (string, error) {
				return c.finish(ctx.Suspend, c.first(ctx, remote, in))
			},
			node.InputSchema(schema),
			node.OnPackResume(func(ctx *node.PackContext[P], in json.RawMessage, r node.Resumed[json.RawMessage]) (string, error) {
				return c.resume(ctx, ctx.Suspend, remote, in, r.Resolution)
			}))
	})
}

// mount lists the server's tools and builds a tool of each it can use.
func mount[T any](ctx context.Context, c *Client, build func(local, desc, remote string, schema json.RawMessage) T) ([]T, error) {
	_, tools, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		t := tools[name]
		local := c.cfg.Prefix + name
		schema, err := Schema(t.InputSchema)
		if err == nil && !node.ValidName(local) {
			err = fmt.Errorf("%q is not a valid tool name", local)
		}
		if err != nil {
			c.log.Warn("mcp tool left out", "tool", name, "err", err)
			continue
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		out = append(out, build(local, desc, name, schema))
	}
	return out, nil
}

// first is a tool's first call: it asks for an approval first when
// Config.Approve wants one.
func (c *Client) first(ctx context.Context, remote string, in json.RawMessage) outcome {
	if c.cfg.Approve != nil {
		_, tools, err := c.list(ctx)
		if err != nil {
			return outcome{err: err}
		}
		if t := tools[remote]; t != nil && c.cfg.Approve(t) {
			return outcome{schema: approvalSchema, ask: &InputMetadata{Server: c.cfg.Name, Tool: remote, Mode: ModeApproval,
				Message: fmt.Sprintf("Call %s of %s with %s?", remote, c.cfg.Name, errtext.Clip(string(in), maxArgsShown))}}
		}
	}
	return c.call(ctx, remote, in, nil)
}

// resume takes the call of the server's tool remote up again with the
// answer r brings.
func (c *Client) resume(ctx context.Context, suspend suspendFunc, remote string, in json.RawMessage, r instance.Resolution) (string, error) {
	if meta, err := instance.Decode[InputMetadata](r.Metadata); err == nil && meta.Mode == ModeApproval {
		var a Approval
		if !r.IsError {
			if a, err = instance.Decode[Approval](r.Payload); err != nil {
				return "", err
			}
		} else {
			a.Comment = r.Text()
		}
		if !a.Approve {
			return "", errors.New(strings.TrimSuffix("the call was not approved: "+a.Comment, ": "))
		}
		return c.finish(suspend, c.call(ctx, remote, in, nil))
	}
	meta, err := answered(r)
	if err != nil {
		return "", err
	}
	return c.finish(suspend, c.call(ctx, remote, in, meta))
}

// suspendFunc is a tool context's Suspend.
type suspendFunc func(reason string, opts ...instance.SuspendOption) error

// outcome is what one call of the server came to: a result, an input to
// ask for, or an error result.
type outcome struct {
	text   string
	ask    *InputMetadata
	schema json.RawMessage
	err    error
}

// finish returns o as a tool handler does, suspending through suspend
// when the server asks for input.
func (c *Client) finish(suspend suspendFunc, o outcome) (string, error) {
	if o.err != nil || o.ask == nil {
		return o.text, o.err
	}
	reason := o.ask.Message
	if reason == "" {
		reason = "the MCP server " + c.cfg.Name + " asks for input"
	}
	opts := []instance.SuspendOption{instance.WithMetadata(o.ask)}
	if o.schema != nil {
		opts = append(opts, instance.WithPayloadSchema(o.schema))
	}
	if ev := URLEvent(c.cfg.Name, o.ask.ElicitationID); o.ask.Mode == ModeURL && o.ask.ElicitationID != "" && instance.CheckEvent(ev) == nil {
		opts = append(opts, instance.WithEvent(ev))
	}
	return "", suspend(reason, opts...)
}

// answered returns the metadata of the resolved suspension r with r's
// answer added: an accepted form's content, a URL flow done, a decline
// (an error payload), or a cancel (an error payload saying "cancel").
func answered(r instance.Resolution) (*InputMetadata, error) {
	meta, err := instance.Decode[InputMetadata](r.Metadata)
	if err != nil {
		return nil, fmt.Errorf("mcp suspension metadata: %w", err)
	}
	res := sdk.ElicitResult{Action: "accept"}
	switch {
	case r.IsError && strings.EqualFold(strings.TrimSpace(r.Text()), "cancel"):
		res.Action = "cancel"
	case r.IsError:
		res.Action = "decline"
	case meta.Mode == ModeForm:
		if err := json.Unmarshal(r.Payload, &res.Content); err != nil {
			return nil, fmt.Errorf("the answer is not a JSON object: %w", err)
		}
	}
	raw, err := json.Marshal(&res)
	if err != nil {
		return nil, err
	}
	meta.Answers = append(meta.Answers, Answer{Request: meta.Request, Fingerprint: meta.Fingerprint, Result: raw})
	return &meta, nil
}

// call calls the server's tool name with args, continuing from prev (the
// metadata of the answered suspension) when set.
func (c *Client) call(ctx context.Context, name string, args json.RawMessage, prev *InputMetadata) outcome {
	cs, tools, err := c.list(ctx)
	if err != nil {
		return outcome{err: err}
	}
	if tools[name] == nil {
		return outcome{err: fmt.Errorf("%w: %s no longer offers the tool %s", ErrServer, c.cfg.Name, name)}
	}
	if init := cs.InitializeResult(); init == nil || init.ProtocolVersion < mrtrVersion {
		return c.callLegacy(ctx, cs, name, args, prev)
	}
	return c.callMRTR(ctx, cs, name, args, prev)
}

// callMRTR calls a server of the stateless protocol, whose input
// requests come in an input_required result and whose answers go back in
// a retry with the echoed requestState: nothing waits on the server, so
// the retry may come from another process, hours later.
func (c *Client) callMRTR(ctx context.Context, cs *sdk.ClientSession, name string, args json.RawMessage, prev *InputMetadata) outcome {
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	if prev != nil {
		o, done := c.respond(ctx, prev, params)
		if done {
			return o
		}
	}
	for range maxRounds {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
		res, err := cs.CallTool(cctx, params)
		cancel()
		if err != nil {
			return outcome{err: c.fault(cs, "call "+name, err)}
		}
		if !res.NeedsInput() {
			return c.result(res)
		}
		raw, err := json.Marshal(res.InputRequests)
		if err != nil {
			return outcome{err: fmt.Errorf("%w: %s: input requests: %v", ErrServer, c.cfg.Name, err)}
		}
		meta := &InputMetadata{Server: c.cfg.Name, Tool: name, RequestState: res.RequestState, InputRequests: raw}
		if o, done := c.respond(ctx, meta, params); done {
			return o
		}
	}
	return outcome{err: fmt.Errorf("%w: %s: still asking for input after %d rounds", ErrServer, c.cfg.Name, maxRounds)}
}

// respond works on meta's input requests: it returns the next one a
// person must answer (done), or fills params with every answer for the
// retry. A sampling request is answered with the Sampling model, or is
// an error result without one.
func (c *Client) respond(ctx context.Context, meta *InputMetadata, params *sdk.CallToolParams) (outcome, bool) {
	var reqs sdk.InputRequestMap
	if err := json.Unmarshal(meta.InputRequests, &reqs); err != nil {
		return outcome{err: fmt.Errorf("%w: %s: input requests: %v", ErrServer, c.cfg.Name, err)}, true
	}
	given := map[string]json.RawMessage{}
	for _, a := range meta.Answers {
		given[a.Request] = a.Result
	}
	responses := sdk.InputResponseMap{}
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		switch p := reqs[id].(type) {
		case *sdk.ElicitParams:
			raw, ok := given[id]
			if !ok {
				ask := *meta
				ask.Request = id
				return c.ask(&ask, p), true
			}
			var res sdk.ElicitResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return outcome{err: fmt.Errorf("mcp answer %s: %w", id, err)}, true
			}
			responses[id] = &res
		case *sdk.ListRootsParams:
			responses[id] = &sdk.ListRootsResult{Roots: []*sdk.Root{}}
		case *sdk.CreateMessageWithToolsParams:
			res, err := c.sample(ctx, p)
			if err != nil {
				return outcome{err: err}, true
			}
			responses[id] = res
		default:
			return outcome{err: fmt.Errorf("%w: %s asks for %T, which markov does not offer", ErrServer, c.cfg.Name, p)}, true
		}
	}
	params.InputResponses, params.RequestState = responses, meta.RequestState
	return outcome{}, false
}

// ask returns the outcome that suspends the call for the elicitation p,
// described by meta.
func (c *Client) ask(meta *InputMetadata, p *sdk.ElicitParams) outcome {
	meta.Message, meta.URL, meta.ElicitationID = p.Message, p.URL, p.ElicitationID
	meta.Mode = p.Mode
	if meta.Mode == "" {
		meta.Mode = ModeForm
		if p.URL != "" {
			meta.Mode = ModeURL
		}
	}
	o := outcome{ask: meta}
	switch meta.Mode {
	case ModeForm:
		schema, err := Schema(p.RequestedSchema)
		if err != nil {
			return outcome{err: fmt.Errorf("%s asks for input with a schema markov cannot use: %w", c.cfg.Name, err)}
		}
		o.schema = schema
	case ModeURL:
	default:
		return outcome{err: fmt.Errorf("%w: %s asks for input in the unknown mode %q", ErrServer, c.cfg.Name, meta.Mode)}
	}
	return o
}

// callLegacy calls a server of an older protocol, whose elicitations are
// requests of its own made while the call is open. A call cannot stay
// open for hours, so the first elicitation that has no answer yet is
// answered "cancel", the call is abandoned, and the markov call suspends
// for it; once answered, the call is made again from the start and each
// elicitation the server repeats gets its saved answer. See docs/MCP.md
// for what that costs.
func (c *Client) callLegacy(ctx context.Context, cs *sdk.ClientSession, name string, args json.RawMessage, prev *InputMetadata) outcome {
	c.legacy.Lock()
	defer c.legacy.Unlock()
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	r := &replay{cancel: cancel}
	if prev != nil {
		r.answers = prev.Answers
	}
	c.open.Store(r)
	res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: name, Arguments: args})
	c.open.Store(nil)
	if asked := r.asked(); asked != nil {
		meta := &InputMetadata{Server: c.cfg.Name, Tool: name, Request: fmt.Sprintf("elicitation-%d", asked.index+1),
			Fingerprint: asked.fingerprint, Answers: r.answers[:asked.index]}
		return c.ask(meta, asked.params)
	}
	if err != nil {
		return outcome{err: c.fault(cs, "call "+name, err)}
	}
	return c.result(res)
}

// replay answers the elicitations of one legacy call: the saved answers
// in order, while the questions match, then "cancel" to the first new one,
// which it records.
type replay struct {
	cancel  context.CancelFunc
	answers []Answer

	mu    sync.Mutex
	n     int
	fresh *newQuestion
}

// newQuestion is an elicitation without a saved answer.
type newQuestion struct {
	params      *sdk.ElicitParams
	index       int
	fingerprint string
}

func (r *replay) asked() *newQuestion {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fresh
}

func (r *replay) next(p *sdk.ElicitParams) *sdk.ElicitResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	fp := fingerprint(p)
	i := r.n
	r.n++
	if r.fresh == nil && i < len(r.answers) && r.answers[i].Fingerprint == fp {
		var res sdk.ElicitResult
		if json.Unmarshal(r.answers[i].Result, &res) == nil {
			return &res
		}
	}
	if r.fresh == nil {
		r.fresh = &newQuestion{params: p, index: min(i, len(r.answers)), fingerprint: fp}
		r.cancel()
	}
	return &sdk.ElicitResult{Action: "cancel"}
}

// fingerprint identifies an elicitation by what it asks (its mode,
// message and schema), not by its per-request IDs or URL.
func fingerprint(p *sdk.ElicitParams) string {
	raw, _ := json.Marshal([]any{p.Mode, p.Message, p.RequestedSchema})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// elicit is the SDK's elicitation handler: a request of an older server
// belongs to the legacy call open, which the client has one of at a time.
func (c *Client) elicit(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	r := c.open.Load()
	if r == nil {
		return &sdk.ElicitResult{Action: "cancel"}, nil
	}
	return r.next(req.Params), nil
}

// result turns the server's result into the markov tool's: its text, an
// error result when the server says the call failed.
func (c *Client) result(res *sdk.CallToolResult) outcome {
	raw, err := json.Marshal(res)
	if err != nil {
		return outcome{err: fmt.Errorf("%w: %s: result: %v", ErrServer, c.cfg.Name, err)}
	}
	if len(raw) > c.cfg.MaxResult {
		return outcome{err: fmt.Errorf("%w: %s: a result of %d bytes, over the limit of %d", ErrServer, c.cfg.Name, len(raw), c.cfg.MaxResult)}
	}
	text := Text(res)
	if res.IsError {
		if text == "" {
			text = "the tool failed"
		}
		return outcome{err: errors.New(text)}
	}
	return outcome{text: text}
}

// Text renders a tool result for the model: the text of its content
// parts, a line per resource link, image or audio; the structured content
// as JSON when there is no text.
func Text(res *sdk.CallToolResult) string {
	var parts []string
	hasText := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts, hasText = append(parts, c.Text), true
		case *sdk.ResourceLink:
			line := "resource link: " + c.URI
			if c.Name != "" {
				line += " (" + c.Name + ")"
			}
			if c.Description != "" {
				line += ": " + c.Description
			}
			parts = append(parts, line)
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				parts, hasText = append(parts, "resource "+r.URI+":\n"+r.Text), true
			} else if r != nil {
				parts = append(parts, fmt.Sprintf("resource %s (%s, %d bytes)", r.URI, r.MIMEType, len(r.Blob)))
			}
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		}
	}
	if !hasText && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(raw))
		}
	}
	return strings.Join(parts, "\n")
}
