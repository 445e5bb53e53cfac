package executor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/internal/tracing"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// Config configures the standard executor. A charter builds it from its
// own configuration (machine.CharterConfig has fields of the same names);
// build one yourself only to wrap it.
type Config struct {
	// Model answers every leaf. Required.
	Model llm.Model
	// Nodes are the nodes transitions may lead to: the charter's nodes.
	Nodes []*node.Node
	// Tools are offered to every leaf, after the leaf's own, its packs'
	// and its ancestors' tools. They read the leaf's state and may not
	// update it.
	Tools []node.Tool[any]
	// Instructions open every system prompt.
	Instructions string
	// Settings are the default model settings; nodes override them field
	// by field.
	Settings llm.Settings
	// Prompt builds system prompts (DefaultPrompt if nil).
	Prompt PromptBuilder
	// ToolTimeout bounds each call of a tool without a timeout of its own
	// (node.Timeout), and of its resume handler; zero means no limit. See
	// ErrToolTimeout.
	ToolTimeout time.Duration
	// Clock tells the time of suspensions (time.Now if nil).
	Clock func() time.Time
	// NewID returns fresh suspend and instance IDs (instance.NewID if
	// nil).
	NewID func() string
	// Logger receives debug logs (silent if nil).
	Logger *slog.Logger
	// Tracer records spans for model calls and tools (none if nil), named
	// and attributed after the OpenTelemetry GenAI conventions.
	Tracer trace.Tracer
	// Meter records metrics of model calls (gen_ai.client.token.usage,
	// gen_ai.client.operation.duration) and tools (markov.tool.duration);
	// none if nil.
	Meter metric.Meter
}

// standard is the executor New returns.
type standard struct {
	cfg    Config
	prompt PromptBuilder
	nodes  map[string]*node.Node
	tools  []*frame.Tool // the charter's
	tracer trace.Tracer
	met    *telemetry.Metrics
	// provider is the model's gen_ai.provider.name.
	provider string
	log      *slog.Logger

	// sets caches the tool sets of node chains.
	mu   sync.RWMutex
	sets map[string]*toolset
	// prompts keeps the last default prompt of each node whose state
	// holds no references (see systemPrompt); nil with a custom builder.
	prompts map[string]*atomic.Pointer[promptEntry]
	// spareStep is stepSpare, bound once (access.Stepper hands it out).
	spareStep func(ctx context.Context, req any, spare *any) (any, error)
}

// New returns the standard executor. It is safe for concurrent use.
func New(cfg Config) Executor {
	e := &standard{cfg: cfg, prompt: cfg.Prompt, nodes: make(map[string]*node.Node, len(cfg.Nodes)),
		tracer: cfg.Tracer, met: telemetry.New(cfg.Meter), provider: telemetry.ProviderOf(cfg.Model),
		log: cfg.Logger, sets: map[string]*toolset{}}
	e.spareStep = e.stepSpare
	if e.prompt == nil {
		e.prompt = DefaultPrompt
	}
	if e.tracer == nil {
		e.tracer = noop.NewTracerProvider().Tracer("")
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.cfg.Clock == nil {
		e.cfg.Clock = time.Now
	}
	if e.cfg.NewID == nil {
		e.cfg.NewID = func() string { return instance.NewID("") }
	}
	for _, n := range cfg.Nodes {
		e.nodes[n.Name()] = n
	}
	if cfg.Prompt == nil {
		e.prompts = promptSlots(cfg.Nodes)
	}
	for _, t := range cfg.Tools {
		e.tools = append(e.tools, access.ToolOf(t))
	}
	return e
}

// Step runs one inference step. The model's reply is checked before any
// tool runs: a tool use with a missing or duplicate ID gets a fresh one
// and input that is not JSON is wrapped as a JSON string (llm.ToolInput),
// so no reply can leave history that a provider refuses.
func (e *standard) Step(ctx context.Context, req *StepRequest) (*StepResult, error) {
	return e.stepIn(ctx, req, new(scratch))
}

// stepIn runs a step in scratch s, which must be zero.
func (e *standard) stepIn(ctx context.Context, req *StepRequest, s *scratch) (*StepResult, error) {
	lf, r := &s.leaf, &s.result
	if err := e.resolve(lf, req.Root, req.Instance); err != nil {
		return nil, err
	}
	a := new(stepAlloc)
	a.req.Messages = req.Transcript
	lf.req, lf.events, lf.frame, lf.admit, lf.journal = &a.req, req.Events, &a.frame, req.Admit, req.Journal
	r.State = lf.in.State
	var err error
	if req.Reply != nil {
		r.Reply = *req.Reply // prepare replaces what it changes
	} else if r.Reply, err = e.reply(ctx, lf); err != nil {
		return nil, err
	}
	e.prepare(ctx, lf, &r.Reply)
	if req.ReplyOnly || r.Reply.Stop == llm.MaxTokens {
		return r, nil
	}
	if uses := toolUses(&r.Reply.Message); len(uses) > 0 {
		e.runTools(ctx, lf, r, uses)
	}
	return r, nil
}

// toolUses returns the tool uses of m, read-only: its parts themselves,
// capped, when they are all tool uses (no copy), else m.ToolUses().
func toolUses(m *message.Message) []message.Part {
	for i := range m.Parts {
		if m.Parts[i].Kind != message.KindToolUse {
			return m.ToolUses()
		}
	}
	return m.Parts[:len(m.Parts):len(m.Parts)]
}

// reply asks the model for the leaf's reply.
func (e *standard) reply(ctx context.Context, lf *leaf) (Reply, error) {
	in := lf.in
	lf.prompt = PromptContext{
		Instructions: e.cfg.Instructions,
		Node:         lf.node,
		InstanceID:   in.ID,
		State:        in.State,
		Ancestors:    lf.ancestors,
		Packs:        lf.root.Packs,
		Transitions:  lf.tools.transitions,
	}
	system, err := e.systemPrompt(&lf.prompt)
	if err != nil {
		return Reply{}, fmt.Errorf("system prompt for %s: %w", in.ID, err)
	}
	req := lf.req
	*req = llm.Request{
		System:     system,
		Messages:   req.Messages, // the transcript, which Step put there
		Tools:      lf.tools.specs,
		Settings:   e.cfg.Settings.Merge(lf.node.Settings()),
		InstanceID: in.ID,
		Node:       lf.node.Name(),
	}
	if out := lf.node.Output(); out != nil {
		req.Output = &llm.OutputSpec{Name: out.Name, Schema: out.Schema()}
	}
	resp, err := e.generate(ctx, req, lf)
	if err != nil {
		return Reply{}, fmt.Errorf("model call for %s: %w", in.ID, err)
	}
	e.log.LogAttrs(ctx, slog.LevelDebug, "model reply", slog.String("instance", in.ID),
		slog.String("node", lf.node.Name()), slog.String("stop", string(resp.StopReason)))
	return Reply{Message: resp.Message, Stop: resp.StopReason, Usage: resp.Usage}, nil
}

// prepare makes r a reply history can keep: an assistant message of the
// leaf; a cut-off reply without its (maybe half-written) tool uses; tool
// uses repaired; a final reply's structured output added. It changes
// nothing in a reply it prepared before.
func (e *standard) prepare(ctx context.Context, lf *leaf, r *Reply) {
	r.Message.Role = message.Assistant
	r.Message.Source = message.Source{InstanceID: lf.in.ID, Node: lf.node.Name()}
	if r.Stop == llm.MaxTokens {
		r.Message.Parts = withoutToolUses(r.Message.Parts)
		return
	}
	if parts, n := repairToolUses(r.Message.Parts, e.cfg.NewID); n > 0 {
		r.Message.Parts = parts
		e.log.LogAttrs(ctx, slog.LevelWarn, "provider reply: tool uses with a missing or duplicate ID or non-JSON input repaired",
			slog.String("instance", lf.in.ID), slog.Int("repaired", n))
	}
	if !slices.ContainsFunc(r.Message.Parts, func(p message.Part) bool { return p.Kind == message.KindToolUse }) {
		e.structured(ctx, lf, r)
	}
}

// generate calls the model inside a span: Generate, or while someone
// listens to the leaf, a stream.
func (e *standard) generate(ctx context.Context, req *llm.Request, lf *leaf) (*llm.Response, error) {
	ctx, span := e.startModel(ctx, req)
	defer span.End()
	var start time.Time
	metered := e.met.ModelOn(ctx)
	if metered {
		start = time.Now()
	}
	var resp *llm.Response
	var err error
	if lf.events == nil {
		resp, err = e.cfg.Model.Generate(ctx, req)
	} else {
		resp, err = lf.stream(ctx, e.cfg.Model, req)
	}
	if err == nil && resp == nil {
		err = ErrNoResponse
	}
	if metered {
		e.met.Model(ctx, e.provider, req, resp, time.Since(start), err)
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		if span.IsRecording() {
			span.SetAttributes(telemetry.ErrorAttribute(err))
		}
		return nil, err
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.stop", string(resp.StopReason)),
			attribute.Int("markov.tokens.input", resp.Usage.InputTokens), attribute.Int("markov.tokens.output", resp.Usage.OutputTokens))
		telemetry.SetResponse(span, resp)
	}
	return resp, nil
}

// startModel starts the span of a model call, "chat {model}" with the
// GenAI request attributes beside markov's, unless the run is untraced.
func (e *standard) startModel(ctx context.Context, req *llm.Request) (context.Context, trace.Span) {
	if tracing.Off(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := e.tracer.Start(ctx, telemetry.ChatSpanName(req.Settings.Model), trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.instance", req.InstanceID), attribute.String("markov.node", req.Node),
			attribute.Int("markov.messages", len(req.Messages)))
		telemetry.SetRequest(span, e.provider, req)
	}
	return ctx, span
}

func withoutToolUses(parts []message.Part) []message.Part {
	out := make([]message.Part, 0, len(parts))
	for _, p := range parts {
		if p.Kind != message.KindToolUse {
			out = append(out, p)
		}
	}
	return out
}

// structured adds the structured-output part of a final reply.
func (e *standard) structured(ctx context.Context, lf *leaf, r *Reply) {
	spec := lf.node.Output()
	if spec == nil {
		return
	}
	for _, p := range r.Message.Parts {
		if p.Kind == message.KindStructured {
			return // the provider mapped it already
		}
	}
	text := r.Message.Text()
	data, err := spec.Parse(text)
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "structured output does not parse",
			slog.String("instance", lf.in.ID), slog.String("error", err.Error()))
		return
	}
	parts := r.Message.Parts
	r.Message.Parts = append(parts[:len(parts):len(parts)], message.Structured(data, text))
}
