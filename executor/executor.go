// Package executor runs one inference step for one leaf — system prompt,
// tool list, model call, tool execution, suspension collection — and runs
// commands. It never mutates the tree: it returns effects as data (an
// Outcome) that the machine validates and applies.
package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/internal/tracing"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// Executor runs steps and commands. Its fields are set once by the charter;
// it is safe for concurrent use.
type Executor struct {
	Model llm.Model
	// Prompt builds system prompts (DefaultPrompt when nil).
	Prompt PromptBuilder
	// Instructions are the charter's instructions.
	Instructions string
	// Settings are the charter's default model settings.
	Settings llm.Settings
	// ToolTimeout bounds each call of a tool without a timeout of its own
	// (node.Timeout); zero means no limit. See ErrToolTimeout.
	ToolTimeout time.Duration
	// Nodes resolves node names; it returns nil for an unknown name.
	Nodes func(name string) *node.Node
	// Now is the clock.
	Now func() time.Time
	// NewID returns fresh IDs for suspensions and instances.
	NewID  func() string
	Logger *slog.Logger
	// Tracer records spans for model calls and tools (none if nil).
	Tracer trace.Tracer
}

func (e *Executor) tracer() trace.Tracer {
	if e.Tracer == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return e.Tracer
}

// Leaf is everything one step of one leaf needs. The executor reads it and
// never modifies it.
type Leaf struct {
	Instance *instance.Instance
	Node     *node.Node
	// Ancestors are the leaf's ancestors, root first.
	Ancestors []Ancestor
	// Packs are the root's pack states.
	Packs map[string]any
	// Transcript is the leaf's view of history.
	Transcript []message.Message
	// Tools is the leaf's resolved tool set.
	Tools *Toolset
	// PrimaryElsewhere reports a non-worker leaf other than this one.
	PrimaryElsewhere bool
	// Taken reports an instance or suspend ID already in the tree (nil:
	// none is).
	Taken func(id string) bool
}

func (l *Leaf) taken(id string) bool { return l.Taken != nil && l.Taken(id) }

// Outcome is the result of one step: the reply and every effect it asks
// for, not yet applied.
type Outcome struct {
	InstanceID string
	// Reply is the assistant message.
	Reply message.Message
	Stop  llm.StopReason
	Usage llm.Usage
	// Results holds one tool result per tool use of Reply, in tool-use
	// order; a suspended call's slot has Kind 0.
	Results []message.Part
	// State is the leaf's state after the tools ran.
	State        any
	StateChanged bool
	// Packs holds pack states written by the leaf's tools.
	Packs map[string]any
	// Transition is the validated transition of the reply, if any.
	Transition *instance.Effect
	// Suspended lists the calls that suspended, in tool-use order.
	Suspended []instance.SuspendedCall
	// Terminal: a terminal tool ran; the turn ends after its result.
	Terminal bool
}

// HoldsReply reports whether tool calls of the reply are pending, so the
// reply must be held until they are resolved.
func (o *Outcome) HoldsReply() bool {
	for i := range o.Suspended {
		if o.Suspended[i].Kind == instance.KindTool {
			return true
		}
	}
	return false
}

// Step runs one inference step for leaf. The model's reply is checked
// before any tool runs: a tool use with a missing or duplicate ID gets a
// fresh one (see RepairedIDPrefix) and input that is not JSON is wrapped
// as a JSON string (llm.ToolInput), so no reply can leave history that a
// provider refuses.
func (e *Executor) Step(ctx context.Context, leaf *Leaf) (*Outcome, error) {
	prompt := e.Prompt
	if prompt == nil {
		prompt = DefaultPrompt
	}
	in := leaf.Instance
	system, err := prompt(&PromptContext{
		Instructions: e.Instructions,
		Node:         leaf.Node,
		InstanceID:   in.ID,
		State:        in.State,
		Ancestors:    leaf.Ancestors,
		Packs:        packStates(leaf),
		Transitions:  leaf.Tools.Transitions,
	})
	if err != nil {
		return nil, fmt.Errorf("system prompt for %s: %w", in.ID, err)
	}
	req := &llm.Request{
		System:     system,
		Messages:   leaf.Transcript,
		Tools:      leaf.Tools.Specs,
		Settings:   e.Settings.Merge(leaf.Node.Settings()),
		InstanceID: in.ID,
		Node:       leaf.Node.Name(),
	}
	if out := leaf.Node.Output(); out != nil {
		req.Output = &llm.OutputSpec{Name: out.Name, Schema: out.Schema()}
	}
	resp, err := e.generate(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("model call for %s: %w", in.ID, err)
	}
	o := &Outcome{
		InstanceID: in.ID,
		Reply:      resp.Message,
		Stop:       resp.StopReason,
		Usage:      resp.Usage,
		State:      in.State,
	}
	o.Reply.Role = message.Assistant
	o.Reply.Source = message.Source{InstanceID: in.ID, Node: leaf.Node.Name()}
	if e.Logger != nil {
		e.Logger.LogAttrs(ctx, slog.LevelDebug, "model reply", slog.String("instance", in.ID),
			slog.String("node", leaf.Node.Name()), slog.String("stop", string(o.Stop)))
	}
	if o.Stop == llm.MaxTokens {
		// A cut-off reply may hold half-written tool uses: drop them so
		// history stays paired.
		o.Reply.Parts = withoutToolUses(o.Reply.Parts)
		return o, nil
	}
	if parts, n := repairToolUses(o.Reply.Parts, len(leaf.Transcript)); n > 0 {
		o.Reply.Parts = parts
		if e.Logger != nil {
			e.Logger.LogAttrs(ctx, slog.LevelWarn, "provider reply: tool uses with a missing or duplicate ID or non-JSON input repaired",
				slog.String("instance", in.ID), slog.Int("repaired", n))
		}
	}
	uses := o.Reply.ToolUses()
	if len(uses) == 0 {
		e.structured(ctx, leaf, o)
		return o, nil
	}
	e.runTools(ctx, leaf, o, uses)
	return o, nil
}

// generate calls the model inside a span.
func (e *Executor) generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	ctx, span := tracing.Start(ctx, e.tracer(), "markov.model")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.instance", req.InstanceID), attribute.String("markov.node", req.Node),
			attribute.Int("markov.messages", len(req.Messages)))
	}
	defer span.End()
	resp, err := e.Model.Generate(ctx, req)
	if err == nil && resp == nil {
		err = ErrNoResponse
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.stop", string(resp.StopReason)),
			attribute.Int("markov.tokens.input", resp.Usage.InputTokens), attribute.Int("markov.tokens.output", resp.Usage.OutputTokens))
	}
	return resp, nil
}

// call runs one tool call inside a span, within the tool's timeout. The
// frame is nil when the call timed out.
func (e *Executor) call(ctx context.Context, leaf *Leaf, ent entry, u message.Part, state any, packs map[string]any) (*frame.Frame, any, error) {
	ctx, span := tracing.Start(ctx, e.tracer(), "markov.tool")
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.tool", u.Name), attribute.String("markov.instance", leaf.Instance.ID))
	}
	defer span.End()
	f := e.newFrame(ctx, leaf, ent, state, packs)
	if ent.tool.Concurrent {
		f.ReadOnly = true
	}
	f, out, err := e.limit(ctx, ent.tool, f, func(f *frame.Frame) (any, error) { return frame.Call(ent.tool.Run, f, u.Data) })
	if span.IsRecording() {
		outcome := "ok"
		var sr *instance.SuspendRequest
		switch {
		case errors.As(err, &sr):
			outcome = "suspended"
		case errors.Is(err, ErrToolTimeout):
			outcome = "timeout"
			span.SetStatus(codes.Error, err.Error())
		case err != nil:
			outcome = "error"
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attribute.String("markov.outcome", outcome))
	}
	return f, out, err
}

func packStates(leaf *Leaf) []PackState {
	packs := leaf.Node.Packs()
	if len(packs) == 0 {
		return nil
	}
	out := make([]PackState, len(packs))
	for i, p := range packs {
		out[i] = PackState{Pack: p, State: leaf.Packs[p.Name()]}
	}
	return out
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
func (e *Executor) structured(ctx context.Context, leaf *Leaf, o *Outcome) {
	spec := leaf.Node.Output()
	if spec == nil {
		return
	}
	for _, p := range o.Reply.Parts {
		if p.Kind == message.KindStructured {
			return // the provider mapped it already
		}
	}
	text := o.Reply.Text()
	data, err := spec.Parse(text)
	if err != nil {
		if e.Logger != nil {
			e.Logger.LogAttrs(ctx, slog.LevelWarn, "structured output does not parse",
				slog.String("instance", o.InstanceID), slog.String("error", err.Error()))
		}
		return
	}
	o.Reply.Parts = append(o.Reply.Parts[:len(o.Reply.Parts):len(o.Reply.Parts)], message.Structured(data, text))
}

// runTools runs the tool calls of a reply: concurrent tools in parallel
// against the state before the reply, the others in tool-use order, each
// seeing the state the previous one left.
func (e *Executor) runTools(ctx context.Context, leaf *Leaf, o *Outcome, uses []message.Part) {
	o.Results = make([]message.Part, len(uses))
	calls := make([]*instance.SuspendedCall, len(uses))
	var wg *sync.WaitGroup // only a reply with concurrent tools needs one
	for i, u := range uses {
		ent, ok := leaf.Tools.lookup(u.Name)
		if !ok || !ent.tool.Concurrent {
			continue
		}
		if wg == nil {
			wg = new(sync.WaitGroup)
		}
		wg.Go(func() {
			_, out, err := e.call(ctx, leaf, ent, u, leaf.Instance.State, nil)
			o.Results[i], calls[i], _ = e.settle(leaf, ent, u, out, err)
		})
	}
	transitions := 0
	for i, u := range uses {
		ent, ok := leaf.Tools.lookup(u.Name)
		if !ok {
			o.Results[i] = message.ToolResult(u.ID, fmt.Sprintf("unknown tool %q", u.Name), true)
			continue
		}
		if ent.tool.Concurrent {
			continue
		}
		if ent.tool.Transition {
			transitions++
			if transitions > 1 {
				o.Results[i] = message.ToolResult(u.ID, ErrTransitionLimit.Error(), true)
				continue
			}
		}
		f, out, err := e.call(ctx, leaf, ent, u, o.State, o.Packs)
		var eff *instance.Effect
		o.Results[i], calls[i], eff = e.settle(leaf, ent, u, out, err)
		// A handler that suspends keeps the updates it made first.
		if o.Results[i].IsError {
			continue
		}
		switch {
		case eff != nil:
			o.Transition = eff
		case f.Dirty && ent.scope == scopeOwn:
			o.State, o.StateChanged = f.State, true
		case f.Dirty && ent.scope == scopePack:
			if o.Packs == nil {
				o.Packs = map[string]any{}
			}
			o.Packs[ent.pack.Name()] = f.State
		}
		if ent.tool.Terminal {
			o.Terminal = true
		}
	}
	if wg != nil {
		wg.Wait()
	}
	seen := map[string]bool{}
	for i, c := range calls {
		if c == nil {
			continue
		}
		if seen[c.SuspendID] || leaf.taken(c.SuspendID) {
			o.Results[i] = message.ToolResult(uses[i].ID, fmt.Sprintf("%v: suspend ID %q", ErrDuplicateID, c.SuspendID), true)
			continue
		}
		seen[c.SuspendID] = true
		o.Suspended = append(o.Suspended, *c)
	}
}

func (e *Executor) newFrame(ctx context.Context, leaf *Leaf, ent entry, state any, packs map[string]any) *frame.Frame {
	f := &frame.Frame{Context: ctx, InstanceID: leaf.Instance.ID, Messages: leaf.Transcript}
	switch ent.scope {
	case scopeOwn:
		f.State, f.Ops = state, leaf.Node.StateOps()
	case scopeCharter:
		f.State, f.Ops, f.ReadOnly = state, leaf.Node.StateOps(), true
	case scopeAncestor:
		a := leaf.Ancestors[ent.ancestor]
		f.State, f.Ops, f.ReadOnly = a.State, a.Node.StateOps(), true
	case scopePack:
		name := ent.pack.Name()
		s, ok := packs[name]
		if !ok {
			s = leaf.Packs[name]
		}
		f.State, f.Ops, f.ReadOnly = s, ent.pack.StateOps(), leaf.Node.Worker()
	}
	return f
}

// settle turns a handler's return into a tool result, a suspended call, or
// for a transition the validated effect.
func (e *Executor) settle(leaf *Leaf, ent entry, u message.Part, out any, err error) (message.Part, *instance.SuspendedCall, *instance.Effect) {
	if sr, ok := errors.AsType[*instance.SuspendRequest](err); ok {
		if ent.tool.Transition {
			c := e.NewCall(sr, leaf.Instance.ID, instance.KindInstance, instance.ByTransition, u.Name, u.Data)
			return message.ToolResult(u.ID, "suspended: "+sr.Reason, false), &c, nil
		}
		c := e.NewCall(sr, leaf.Instance.ID, instance.KindTool, instance.ByTool, u.Name, u.Data)
		c.ToolUseID = u.ID
		if err := declarePayload(&c, ent.tool.Payload); err != nil {
			return message.ToolResult(u.ID, err.Error(), true), nil, nil
		}
		return message.Part{}, &c, nil
	}
	if err != nil {
		return message.ToolResult(u.ID, err.Error(), true), nil, nil
	}
	if ent.tool.Transition {
		eff, ok := out.(instance.Effect)
		if !ok {
			return message.ToolResult(u.ID, "transition returned no effect", true), nil, nil
		}
		text, err := e.validateEffect(&eff, leaf)
		if err != nil {
			return message.ToolResult(u.ID, err.Error(), true), nil, nil
		}
		return message.ToolResult(u.ID, text, false), nil, &eff
	}
	text, err := instance.ResultText(out)
	if err != nil {
		return message.ToolResult(u.ID, "result does not encode: "+err.Error(), true), nil, nil
	}
	return message.ToolResult(u.ID, text, false), nil, nil
}

// NewCall builds the record of a suspension requested by sr.
func (e *Executor) NewCall(sr *instance.SuspendRequest, instanceID string, kind instance.CallKind, by instance.Initiator, name string, input json.RawMessage) instance.SuspendedCall {
	now := e.Now().UTC()
	c := instance.SuspendedCall{
		SuspendID:   sr.ID,
		InstanceID:  instanceID,
		Kind:        kind,
		Initiator:   by,
		Name:        name,
		Input:       append(json.RawMessage(nil), input...),
		Metadata:    sr.Metadata,
		Reason:      sr.Reason,
		SuspendedAt: now,
		Deadline:    sr.Deadline,
		OnTimeout:   sr.OnTimeout,
		Status:      instance.StatusPending,
	}
	if c.SuspendID == "" {
		c.SuspendID = e.NewID()
	}
	if c.Deadline.IsZero() && sr.Timeout > 0 {
		c.Deadline = now.Add(sr.Timeout)
	}
	return c
}

// declarePayload records the payload schema s (nil: none) on c and checks
// c's on-timeout payload against it, so a deadline cannot resolve the call
// with a payload a resume would be refused.
func declarePayload(c *instance.SuspendedCall, s *frame.Schema) error {
	if s == nil {
		return nil
	}
	c.PayloadSchema = append(json.RawMessage(nil), s.Raw...)
	if !c.OnTimeout.Resume {
		return nil
	}
	if err := frame.CheckPayload(c, c.OnTimeout.Payload, c.OnTimeout.IsError); err != nil {
		return fmt.Errorf("on-timeout payload: %w", err)
	}
	return nil
}

// validateEffect checks a transition requested for leaf and normalizes it:
// states decoded and validated for their nodes, spawn IDs assigned. It
// returns a description for the tool result.
func (e *Executor) validateEffect(eff *instance.Effect, leaf *Leaf) (string, error) {
	// A non-worker leaf frees its primary slot when it leaves or stops
	// being a leaf; a worker may only add a primary when there is none.
	primaries := 0
	switch eff.Kind {
	case instance.EffectNone:
		return "no change", nil
	case instance.EffectGoto:
		target, s, err := e.placement(eff.Target, eff.State)
		if err != nil {
			return "", err
		}
		eff.State = s
		if !target.Worker() {
			primaries = 1
		}
		if err := e.checkPrimaries(leaf, primaries); err != nil {
			return "", err
		}
		return "transitioned to " + eff.Target, nil
	case instance.EffectSpawn:
		if len(eff.Children) == 0 {
			return "", ErrEmptySpawn
		}
		children := make([]instance.Child, len(eff.Children))
		ids := make([]string, len(children))
		for i, c := range eff.Children {
			n, s, err := e.placement(c.Node, c.State)
			if err != nil {
				return "", err
			}
			if !n.Worker() {
				primaries++
			}
			if c.ID == "" {
				c.ID = e.NewID()
			}
			if leaf.taken(c.ID) || slices.ContainsFunc(children[:i], func(o instance.Child) bool { return o.ID == c.ID }) {
				return "", fmt.Errorf("%w: instance ID %q", ErrDuplicateID, c.ID)
			}
			c.State = s
			children[i], ids[i] = c, c.Node+" "+c.ID
		}
		if err := e.checkPrimaries(leaf, primaries); err != nil {
			return "", err
		}
		eff.Children = children
		return "spawned " + strings.Join(ids, ", "), nil
	case instance.EffectCede:
		if len(leaf.Ancestors) == 0 {
			return "", ErrCedeFromRoot
		}
		return "ceded to " + leaf.Ancestors[len(leaf.Ancestors)-1].InstanceID, nil
	}
	return "", fmt.Errorf("unknown effect kind %d", eff.Kind)
}

// placement resolves the node a transition puts an instance on and the
// state it starts with.
func (e *Executor) placement(name string, state any) (*node.Node, any, error) {
	n := e.Nodes(name)
	if n == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownNode, name)
	}
	s, err := n.NormalizeState(state)
	return n, s, err
}

func (e *Executor) checkPrimaries(leaf *Leaf, added int) error {
	if leaf.PrimaryElsewhere {
		added++
	}
	if added > 1 {
		return ErrPrimaryConflict
	}
	return nil
}

// Resolve turns the resolution of a suspended tool call into its result,
// through the tool's resume handler when it has one. A handler may suspend
// again: the new call is returned and the slot stays pending.
func (e *Executor) Resolve(ctx context.Context, leaf *Leaf, call *instance.SuspendedCall, r instance.Resolution) (result message.Part, state any, again *instance.SuspendedCall) {
	state = leaf.Instance.State
	ent, ok := leaf.Tools.lookup(call.Name)
	if !ok || ent.tool.Resume == nil {
		return message.ToolResult(call.ToolUseID, PayloadText(r.Payload), r.IsError), state, nil
	}
	f, out, err := e.limit(ctx, ent.tool, e.newFrame(ctx, leaf, ent, state, nil), func(f *frame.Frame) (any, error) {
		return frame.CallResume(ent.tool.Resume, f, call.Input, r)
	})
	var sr *instance.SuspendRequest
	if errors.As(err, &sr) {
		c := e.NewCall(sr, call.InstanceID, instance.KindTool, instance.ByTool, call.Name, call.Input)
		c.ToolUseID, c.Stage = call.ToolUseID, call.Stage+1
		if err := declarePayload(&c, ent.tool.Payload); err != nil {
			return message.ToolResult(call.ToolUseID, err.Error(), true), state, nil
		}
		return message.Part{}, state, &c
	}
	if err != nil {
		return message.ToolResult(call.ToolUseID, err.Error(), true), state, nil
	}
	if f.Dirty && ent.scope == scopeOwn {
		state = f.State
	}
	text, err := instance.ResultText(out)
	if err != nil {
		return message.ToolResult(call.ToolUseID, "result does not encode: "+err.Error(), true), state, nil
	}
	return message.ToolResult(call.ToolUseID, text, r.IsError), state, nil
}

// PayloadText is the tool-result text of a stored payload: a JSON string is
// the text itself, anything else its JSON.
func PayloadText(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// CommandOutcome is the result of a command, not yet applied.
type CommandOutcome struct {
	Value any
	// State is the instance's state after the command.
	State        any
	StateChanged bool
	// Pack names the pack a pack command ran on; PackState is its state.
	Pack      string
	PackState any
	// Transition is the validated transition the command requested.
	Transition *instance.Effect
	// Suspended is set when the command suspended.
	Suspended *instance.SuspendedCall
	// Resumes are the suspensions the command resolves.
	Resumes []frame.Resume
}

// Command runs the command name on leaf's instance: the node's commands
// first, then its packs' commands.
func (e *Executor) Command(ctx context.Context, leaf *Leaf, name string, input json.RawMessage) (*CommandOutcome, error) {
	def, pack, ok := findCommand(leaf.Node, name)
	if !ok {
		return nil, fmt.Errorf("%w: %q on node %s", command.ErrUnknownCommand, name, leaf.Node.Name())
	}
	f := &frame.Frame{Context: ctx, InstanceID: leaf.Instance.ID}
	if pack != nil {
		f.State, f.Ops, f.ReadOnly = leaf.Packs[pack.Name()], pack.StateOps(), leaf.Node.Worker()
	} else {
		f.State, f.Ops = leaf.Instance.State, leaf.Node.StateOps()
	}
	out, err := def.Call(f, input)
	co := &CommandOutcome{Value: out, State: leaf.Instance.State, Resumes: f.Resumes}
	var sr *instance.SuspendRequest
	switch {
	case errors.As(err, &sr):
		c := e.NewCall(sr, leaf.Instance.ID, instance.KindCommand, instance.ByCommand, name, input)
		if err := declarePayload(&c, def.Payload); err != nil {
			return nil, fmt.Errorf("command %s: %w", name, err)
		}
		co.Value, co.Suspended = nil, &c
	case err != nil:
		return nil, command.Failed(name, err)
	}
	if f.Dirty {
		if pack != nil {
			co.Pack, co.PackState = pack.Name(), f.State
		} else {
			co.State, co.StateChanged = f.State, true
		}
	}
	if f.Effect != nil {
		if _, err := e.validateEffect(f.Effect, leaf); err != nil {
			return nil, fmt.Errorf("command %s: %w", name, err)
		}
		co.Transition = f.Effect
	}
	return co, nil
}

func findCommand(n *node.Node, name string) (command.Def, *node.Pack, bool) {
	for _, d := range n.Commands() {
		if d.Name == name {
			return d, nil, true
		}
	}
	for _, p := range n.Packs() {
		for _, d := range p.Commands() {
			if d.Name == name {
				return d, p, true
			}
		}
	}
	return command.Def{}, nil, false
}
