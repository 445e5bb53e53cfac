package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// TracerName is the instrumentation scope of markov's spans and metrics.
const TracerName = telemetry.ScopeName

// DefaultMaxSteps bounds the rounds of one Run when CharterConfig.MaxSteps
// is zero.
const DefaultMaxSteps = 64

// CharterConfig describes a charter. Zero fields take the documented
// defaults.
type CharterConfig struct {
	// Name names the charter (for logs and docs).
	Name string
	// Instructions open every system prompt.
	Instructions string
	// Model answers every leaf. Required unless Executor is set.
	Model llm.Model
	// Settings are the default model settings; nodes override them field
	// by field.
	Settings llm.Settings
	// Nodes are every node machines of this charter may run. Required.
	Nodes []*node.Node
	// Packs are available to every node that opts in; packs named by nodes
	// are added too.
	Packs []*node.Pack
	// Tools are offered to every leaf. They read the leaf's state and may
	// not update it.
	Tools []node.Tool[any]
	// SystemPrompt builds system prompts (executor.DefaultPrompt if nil).
	SystemPrompt executor.PromptBuilder
	// MaxSteps bounds the rounds of one Run (DefaultMaxSteps if zero).
	MaxSteps int
	// Window, when positive, bounds the transcript each leaf's step
	// carries (what its model sees) to its last Window messages
	// (message.Window: fewer, so that it starts at a user message where
	// it can, and never at a tool result). History keeps every message;
	// the window bounds what a model is sent as a conversation grows, and
	// lets package durable load only the end of a long history to run a
	// machine. Zero means no window: the whole transcript.
	Window int
	// ToolTimeout bounds each call of a tool (and of its resume handler)
	// that sets no timeout of its own with node.Timeout. A call that
	// outlives it becomes an error result the model sees ("tool X timed
	// out after D") and the round goes on; a handler that ignores its
	// context is abandoned and whatever it returns or writes later is
	// discarded. Zero means no limit: such a handler holds Run until it
	// returns.
	ToolTimeout time.Duration
	// Clock tells the time for suspensions and deadlines (time.Now if nil).
	Clock func() time.Time
	// NewID returns fresh instance and suspend IDs (random, unguessable
	// IDs if nil). Tests set it for deterministic IDs.
	NewID func() string
	// Logger receives debug logs of runs (silent if nil).
	Logger *slog.Logger
	// TracerProvider records OpenTelemetry spans for runs, steps, model
	// calls, tools, suspensions and resumes (the global provider if nil).
	TracerProvider trace.TracerProvider
	// MeterProvider records OpenTelemetry metrics: tokens in and out and
	// the latency of model calls (gen_ai.client.token.usage,
	// gen_ai.client.operation.duration), tool latency
	// (markov.tool.duration), and suspensions created and resolved by
	// outcome (markov.suspensions.created, markov.suspensions.resolved).
	// The global provider if nil, which records nothing until one is
	// installed.
	MeterProvider metric.MeterProvider
	// Executor runs the leaves' steps, resume handlers and commands. Nil
	// means the standard executor, executor.New with this configuration's
	// Model, Nodes, Tools, Instructions, Settings, SystemPrompt,
	// ToolTimeout, Clock, NewID, Logger, tracer and meter. Set it to wrap that
	// executor (build it with executor.New from the same values) or to
	// replace it; the charter then uses none of Model, Settings,
	// Instructions, SystemPrompt and ToolTimeout itself.
	Executor executor.Executor
	// Hooks are the lifecycle hooks on suspensions: OnSuspend before one
	// is recorded (it may refuse it), OnResolved after one is resolved.
	Hooks Hooks
	// Digest builds the digest a fresh-turn resume (ResumeInput.FreshTurn)
	// puts in place of the resumed instance's earlier transcript: it may
	// ask a model for a summary. Nil means DefaultDigest. An error fails
	// the resume, which then changes nothing.
	Digest DigestFunc
}

// Charter is the static registry machines run against: nodes, packs,
// charter-wide tools, the model and limits. It is immutable and shared by
// many machines.
type Charter struct {
	name     string
	nodes    map[string]*node.Node
	packs    map[string]*node.Pack
	tools    []*frame.Tool
	exec     executor.Executor
	maxSteps int
	window   int
	now      func() time.Time
	newID    func() string
	logger   *slog.Logger
	hooks    Hooks
	tracer   trace.Tracer
	// idleTP is otel's global tracer provider as the charter found it,
	// when none was configured and none had been set globally (nil
	// otherwise): while it is still the global one, nobody traces.
	idleTP trace.TracerProvider
	meter  metric.Meter
	met    *telemetry.Metrics
	order  []string // node names in declaration order, for graphs
	digest DigestFunc
	// spareStep is exec's step in reused memory when exec is the
	// standard executor, nil otherwise (access.Stepper; Machine.step).
	spareStep func(ctx context.Context, req any, spare *any) (any, error)
	// inputs are the input schemas of each command name's declarations
	// (nil: one that does not compile, which the run reports), compiled
	// by the first CheckInvocation.
	inputs     map[string][]*frame.Schema
	inputsOnce sync.Once
}

// NewCharter checks cfg and builds a charter. Every node name a transition
// declares must be registered; tool names must not clash within any node's
// tool list (own tools, packs' tools, charter tools).
func NewCharter(cfg CharterConfig) (*Charter, error) {
	if cfg.Model == nil && cfg.Executor == nil {
		return nil, fmt.Errorf("%w: no model", ErrInvalidCharter)
	}
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrInvalidCharter)
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("%w: window %d", ErrInvalidCharter, cfg.Window)
	}
	c := newCharter(cfg)
	for _, check := range []func(CharterConfig) error{c.addPacks, c.addNodes, c.addTools, c.checkNodes} {
		if err := check(cfg); err != nil {
			return nil, err
		}
	}
	c.exec = cfg.Executor
	if c.exec == nil {
		c.exec = executor.New(executor.Config{
			Model:        cfg.Model,
			Nodes:        cfg.Nodes,
			Tools:        cfg.Tools,
			Instructions: cfg.Instructions,
			Settings:     cfg.Settings,
			Prompt:       cfg.SystemPrompt,
			ToolTimeout:  cfg.ToolTimeout,
			Clock:        c.now,
			NewID:        c.newID,
			Logger:       c.logger,
			Tracer:       c.tracer,
			Meter:        c.meter,
		})
	}
	c.spareStep = access.Stepper(c.exec)
	return c, nil
}

// newCharter returns a charter with cfg's settings, defaults filled in,
// and no nodes, packs or tools yet.
func newCharter(cfg CharterConfig) *Charter {
	c := &Charter{
		name:     cfg.Name,
		nodes:    make(map[string]*node.Node, len(cfg.Nodes)),
		packs:    map[string]*node.Pack{},
		maxSteps: cfg.MaxSteps,
		window:   cfg.Window,
		now:      cfg.Clock,
		newID:    cfg.NewID,
		logger:   cfg.Logger,
		hooks:    cfg.Hooks,
		digest:   cfg.Digest,
	}
	if c.maxSteps <= 0 {
		c.maxSteps = DefaultMaxSteps
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.newID == nil {
		c.newID = func() string { return instance.NewID("") }
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
		if t := reflect.TypeOf(tp); t.Kind() == reflect.Pointer && t.Elem().PkgPath() == otelGlobal {
			c.idleTP = tp
		}
	}
	c.tracer = tp.Tracer(TracerName)
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	c.meter = mp.Meter(TracerName)
	c.met = telemetry.New(c.meter)
	return c
}

// otelGlobal is the package of otel's global tracer provider before one
// is set: it starts spans that record nothing and carry no context of
// their own.
const otelGlobal = "go.opentelemetry.io/otel/internal/global"

// untraced reports whether runs record no spans: the charter uses otel's
// global tracer provider, and no provider has been set globally.
func (c *Charter) untraced() bool {
	return c.idleTP != nil && otel.GetTracerProvider() == c.idleTP
}

// addPack registers p, which may already be registered (nodes share
// packs); another pack of the same name is an error.
func (c *Charter) addPack(p *node.Pack) error {
	if p == nil {
		return fmt.Errorf("%w: nil pack", ErrInvalidCharter)
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidCharter, err)
	}
	if q, ok := c.packs[p.Name()]; ok && q != p {
		return fmt.Errorf("%w: two packs named %q", ErrInvalidCharter, p.Name())
	}
	c.packs[p.Name()] = p
	return nil
}

// addPacks registers the charter's packs.
func (c *Charter) addPacks(cfg CharterConfig) error {
	for _, p := range cfg.Packs {
		if err := c.addPack(p); err != nil {
			return err
		}
	}
	return nil
}

// addNodes registers the nodes, in order, and the packs they name.
func (c *Charter) addNodes(cfg CharterConfig) error {
	for _, n := range cfg.Nodes {
		if n == nil {
			return fmt.Errorf("%w: nil node", ErrInvalidCharter)
		}
		if _, dup := c.nodes[n.Name()]; dup {
			return fmt.Errorf("%w: two nodes named %q", ErrInvalidCharter, n.Name())
		}
		c.nodes[n.Name()] = n
		c.order = append(c.order, n.Name())
		for _, p := range n.Packs() {
			if err := c.addPack(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// addTools registers the charter-wide tools: built, with valid and
// distinct names.
func (c *Charter) addTools(cfg CharterConfig) error {
	seen := map[string]bool{}
	for _, t := range cfg.Tools {
		ft := access.ToolOf(t)
		if ft.Err != nil || !node.ValidName(ft.Spec.Name) || seen[ft.Spec.Name] {
			return fmt.Errorf("%w: charter tool %q: bad or duplicate name, or %v", ErrInvalidCharter, ft.Spec.Name, ft.Err)
		}
		seen[ft.Spec.Name] = true
		c.tools = append(c.tools, ft)
	}
	return nil
}

// checkNodes checks every node against the whole charter: no clashing
// names, no edge to an unknown node.
func (c *Charter) checkNodes(cfg CharterConfig) error {
	for _, n := range cfg.Nodes {
		if err := c.checkNode(n); err != nil {
			return err
		}
	}
	for _, n := range cfg.Nodes {
		for _, e := range n.Edges() {
			target := c.nodes[e.Target]
			if target == nil {
				return fmt.Errorf("%w: node %s: transition %s leads to unknown node %q", ErrInvalidCharter, n.Name(), e.Transition, e.Target)
			}
			if e.State != nil && e.State != target.StateType() {
				return fmt.Errorf("%w: node %s: transition %s carries a %s, but node %s's state is a %s", ErrInvalidCharter, n.Name(), e.Transition, e.State, e.Target, target.StateType())
			}
		}
	}
	return nil
}

// checkNode reports tool and command names that clash on n.
func (c *Charter) checkNode(n *node.Node) error {
	tools := map[string]string{}
	claim := func(name, owner string) error {
		if prev, ok := tools[name]; ok {
			return fmt.Errorf("%w: node %s: name %q of %s clashes with %s", ErrInvalidCharter, n.Name(), name, owner, prev)
		}
		tools[name] = owner
		return nil
	}
	for _, t := range access.NodeOf(n).Tools {
		if err := claim(t.Spec.Name, "node tool"); err != nil {
			return err
		}
	}
	for _, p := range n.Packs() {
		for _, t := range access.PackOf(p).Tools {
			if err := claim(t.Spec.Name, "pack "+p.Name()); err != nil {
				return err
			}
		}
	}
	for _, t := range c.tools {
		if err := claim(t.Spec.Name, "charter tool"); err != nil {
			return err
		}
	}
	cmds := map[string]string{}
	for _, d := range access.NodeOf(n).Commands {
		cmds[d.Name] = "node"
	}
	for _, p := range n.Packs() {
		for _, d := range access.PackOf(p).Commands {
			if prev, ok := cmds[d.Name]; ok {
				return fmt.Errorf("%w: node %s: command %q of pack %s clashes with %s", ErrInvalidCharter, n.Name(), d.Name, p.Name(), prev)
			}
			cmds[d.Name] = "pack " + p.Name()
		}
	}
	return nil
}

// Name returns the charter's name.
func (c *Charter) Name() string { return c.name }

// Node returns the node named name, or nil.
func (c *Charter) Node(name string) *node.Node { return c.nodes[name] }

// Pack returns the pack named name, or nil.
func (c *Charter) Pack(name string) *node.Pack { return c.packs[name] }

// Now returns the charter clock's time.
func (c *Charter) Now() time.Time { return c.now() }

// CheckInvocation reports an invocation that no machine of the charter
// could ever run, changing nothing: a command that no node, nor a pack a
// node uses, declares (wrapping command.ErrUnknownCommand), or an input
// that no declaration of the command accepts (wrapping
// instance.ErrInvalidInput, or instance.ErrPayloadDecode for one that
// does not encode). An invocation it passes may still fail when it
// applies: its target, its state. An acceptor that queues commands for a
// later run (durable/fleet) checks them so when it accepts them.
func (c *Charter) CheckInvocation(inv command.Invocation) error {
	c.inputsOnce.Do(c.compileInputs)
	schemas, declared := c.inputs[inv.Name]
	if !declared {
		return fmt.Errorf("%w: %q: no node of charter %s declares it", command.ErrUnknownCommand, inv.Name, c.name)
	}
	input, err := instance.EncodePayload(inv.Input)
	if err != nil {
		return fmt.Errorf("command %s: %w", inv.Name, err)
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	var violation error
	for _, s := range schemas {
		if s == nil {
			return nil // the run says what is wrong
		}
		if violation = s.CheckInput(input); violation == nil {
			return nil
		}
	}
	return fmt.Errorf("command %s: %w", inv.Name, violation)
}

// Commands returns the commands the charter's nodes, and the packs they
// use, declare: one per name, sorted by name. A name several nodes
// declare is the declaration of the first node in name order (packs
// after the node's own); an invocation is still checked against every
// declaration (CheckInvocation).
func (c *Charter) Commands() []command.Info {
	seen := map[string]bool{}
	var out []command.Info
	for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
		n := c.nodes[name]
		decls := n.Commands()
		for _, p := range n.Packs() {
			decls = append(decls, p.Commands()...)
		}
		for _, d := range decls {
			if !seen[d.Name] {
				seen[d.Name] = true
				out = append(out, d)
			}
		}
	}
	slices.SortFunc(out, func(a, b command.Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// compileInputs compiles the input schemas of the commands of every node
// and of the packs nodes use, by command name.
func (c *Charter) compileInputs() {
	c.inputs = map[string][]*frame.Schema{}
	add := func(cmds []command.Info) {
		for _, d := range cmds {
			s, _ := frame.ParseSchema(d.InputSchema) // nil when it does not compile
			c.inputs[d.Name] = append(c.inputs[d.Name], s)
		}
	}
	for _, n := range c.nodes {
		add(n.Commands())
		for _, p := range n.Packs() {
			add(p.Commands())
		}
	}
}

// Window returns CharterConfig.Window: how many messages of its
// transcript a leaf's step carries at most, 0 for all of them.
func (c *Charter) Window() int { return c.window }

// cloneState deep-copies a node or pack state value.
func (c *Charter) cloneState(name string, v any) any {
	if n := c.nodes[name]; n != nil {
		return n.CloneState(v)
	}
	if len(name) > len(instance.PackStateKey) && name[:len(instance.PackStateKey)] == instance.PackStateKey {
		if p := c.packs[name[len(instance.PackStateKey):]]; p != nil {
			return access.PackOf(p).Ops.Clone(v)
		}
	}
	return v
}

// NewMachine returns a machine whose root instance runs rootNode with
// state (nil: the node's initial state), with every pack at its initial
// state.
func (c *Charter) NewMachine(rootNode string, state any) (*Machine, error) {
	n := c.nodes[rootNode]
	if n == nil {
		return nil, fmt.Errorf("%w: %q", executor.ErrUnknownNode, rootNode)
	}
	s, err := n.NormalizeState(state)
	if err != nil {
		return nil, err
	}
	root := &instance.Instance{ID: c.newID(), Node: rootNode, State: s, Idle: true}
	if len(c.packs) > 0 {
		root.Packs = make(map[string]any, len(c.packs))
		for name, p := range c.packs {
			root.Packs[name] = p.Initial()
		}
	}
	return newMachine(c, root, message.History{}), nil
}
