package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/internal/tracing"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
)

// leaf is what one call needs of an instance: its place in the tree, its
// node and its resolved tool set.
type leaf struct {
	root, in *instance.Instance
	node     *node.Node
	// ancestors are in's ancestors, root first.
	ancestors []*instance.Instance
	tools     *toolset
	// events hears the step's events (nil: nobody listens).
	events Sink
	// admit admits the suspensions handlers ask for (nil: all); journal
	// is the machine's effect journal (nil: effects just run).
	admit   Admission
	journal instance.EffectJournal
	// prompt is the step's prompt context, req its model request, and
	// calls holds the suspended calls of a reply of a few tool uses: kept
	// here, they cost the step no allocations of their own. The request's
	// Messages hold the step's transcript from the start (a step continued
	// from a saved reply asks no model, and has it there too).
	prompt PromptContext
	req    *llm.Request
	calls  [4]*instance.SuspendedCall
	// parent holds the ancestors of a child of the root; frame, until
	// taken, is the frame of the step's first tool call that runs on its
	// goroutine (spareFrame).
	parent [1]*instance.Instance
	frame  *frame.Frame
}

// transcript returns the step's transcript.
func (lf *leaf) transcript() []message.Message {
	if lf.req == nil { // a resume or a command: no model request
		return nil
	}
	return lf.req.Messages
}

// stepAlloc is what a step allocates that may outlive it: its model
// request (a model may keep it) and the frame of its first tool call (a
// handler may keep its tool context, or run on after its timeout), one
// allocation instead of two.
type stepAlloc struct {
	req   llm.Request
	frame frame.Frame
}

// scratch is what a step uses and its result holds, and nothing
// outlives: its leaf and its result. Once the machine has applied the
// result, a step of its next round reuses it instead of allocating
// (stepSpare).
type scratch struct {
	leaf   leaf
	result StepResult
}

// leaf resolves instance in of root.
func (e *standard) leaf(root, in *instance.Instance) (*leaf, error) {
	lf := new(leaf)
	return lf, e.resolve(lf, root, in)
}

// resolve fills lf in as the leaf of instance in of root.
func (e *standard) resolve(lf *leaf, root, in *instance.Instance) error {
	lf.root, lf.in, lf.node = root, in, e.nodes[in.Node]
	if lf.node == nil {
		return fmt.Errorf("%w: %q", ErrUnknownNode, in.Node)
	}
	switch {
	case in == root: // the root has no ancestors to find
	case slices.Contains(root.Children, in): // a worker's place: no path to allocate
		lf.parent[0] = root
		lf.ancestors = lf.parent[:]
	default:
		path := root.PathTo(in)
		if path == nil { // not the tree's own instance: found by ID, as ever
			path = root.Path(in.ID)
		}
		lf.ancestors = path[: len(path)-1 : len(path)-1]
	}
	var err error
	lf.tools, err = e.toolset(lf)
	return err
}

// admitCall asks the leaf's Admission about call c, which the handler
// error err asked for: the error refusing it, or nil.
func (lf *leaf) admitCall(ctx context.Context, c *instance.SuspendedCall, err error) error {
	if lf.admit == nil {
		return nil
	}
	sr, _ := errors.AsType[*instance.SuspendRequest](err)
	return lf.admit(ctx, lf.node.Name(), c, sr != nil && sr.ID != "")
}

// taken reports an instance or suspend ID in use in the leaf's tree.
func (lf *leaf) taken(id string) bool {
	if lf.root.Find(id) != nil {
		return true
	}
	_, c := lf.root.FindCall(id)
	return c != nil
}

// primaryElsewhere reports a non-worker leaf of the tree other than lf.
func (e *standard) primaryElsewhere(lf *leaf) bool {
	for l := range lf.root.Leaves() {
		if n := e.nodes[l.Node]; l != lf.in && n != nil && !n.Worker() {
			return true
		}
	}
	return false
}

// scope says whose state a tool works on.
type scope uint8

const (
	scopeOwn      scope = iota // the leaf's state
	scopeAncestor              // an ancestor's state, read-only
	scopePack                  // a pack's state on the root
	scopeCharter               // the leaf's state, read-only
)

type entry struct {
	tool     *frame.Tool
	scope    scope
	ancestor int // index into leaf.ancestors for scopeAncestor
	pack     *node.Pack
}

// toolset is the tools one leaf may call, resolved once per node chain.
type toolset struct {
	// specs are the tool specs sent to the model, in order.
	specs []llm.ToolSpec
	// transitions are the transition tool specs (for the prompt).
	transitions []llm.ToolSpec
	entries     []entry
	byName      map[string]int
}

// toolset returns the tool set of lf's node chain, resolving it on first
// use.
func (e *standard) toolset(lf *leaf) (*toolset, error) {
	var buf [256]byte
	key := append(buf[:0], lf.in.Node...)
	for _, a := range lf.ancestors {
		key = append(append(key, '/'), a.Node...)
	}
	e.mu.RLock()
	ts := e.sets[string(key)]
	e.mu.RUnlock()
	if ts != nil {
		return ts, nil
	}
	ancestors := make([]*node.Node, len(lf.ancestors))
	for i, a := range lf.ancestors {
		if ancestors[i] = e.nodes[a.Node]; ancestors[i] == nil {
			return nil, fmt.Errorf("%w: %q", ErrUnknownNode, a.Node)
		}
	}
	ts = e.newToolset(lf.node, ancestors)
	e.mu.Lock()
	e.sets[string(key)] = ts
	e.mu.Unlock()
	return ts, nil
}

// newToolset resolves the tools of a leaf running n under ancestors (root
// first): the node's tools and transitions, its packs' tools, its
// ancestors' own tools (nearest first; read-only) and the charter's tools.
// A name already taken shadows later ones, so the node's own tools win.
func (e *standard) newToolset(n *node.Node, ancestors []*node.Node) *toolset {
	ts := &toolset{byName: map[string]int{}}
	add := func(en entry) {
		name := en.tool.Spec.Name
		if _, ok := ts.byName[name]; ok {
			return
		}
		ts.byName[name] = len(ts.entries)
		ts.entries = append(ts.entries, en)
		ts.specs = append(ts.specs, en.tool.Spec)
		if en.tool.Transition {
			ts.transitions = append(ts.transitions, en.tool.Spec)
		}
	}
	for _, t := range access.NodeOf(n).Tools {
		add(entry{tool: t, scope: scopeOwn})
	}
	for _, p := range n.Packs() {
		for _, t := range access.PackOf(p).Tools {
			add(entry{tool: t, scope: scopePack, pack: p})
		}
	}
	for i := len(ancestors) - 1; i >= 0; i-- {
		for _, t := range access.NodeOf(ancestors[i]).Own {
			add(entry{tool: t, scope: scopeAncestor, ancestor: i})
		}
	}
	for _, t := range e.tools {
		add(entry{tool: t, scope: scopeCharter})
	}
	return ts
}

func (ts *toolset) lookup(name string) (entry, bool) {
	i, ok := ts.byName[name]
	if !ok {
		return entry{}, false
	}
	return ts.entries[i], true
}

// runTools runs the tool calls of a reply: concurrent tools in parallel
// against the state before the reply, the others in tool-use order, each
// seeing the state the previous one left.
func (e *standard) runTools(ctx context.Context, lf *leaf, r *StepResult, uses []message.Part) {
	r.Results = make([]message.Part, len(uses))
	calls := lf.calls[:0]
	if len(uses) > len(lf.calls) {
		calls = make([]*instance.SuspendedCall, 0, len(uses))
	}
	calls = calls[:len(uses)]
	wg := e.startConcurrent(ctx, lf, r, uses, calls)
	transitions := 0
	for i, u := range uses {
		ent, ok := lf.tools.lookup(u.Name)
		switch {
		case !ok:
			r.Results[i] = lf.refuse(u, fmt.Sprintf("unknown tool %q", u.Name))
		case ent.tool.Concurrent: // started above
		case ent.tool.Transition && transitions > 0:
			r.Results[i] = lf.refuse(u, ErrTransitionLimit.Error())
		default:
			if ent.tool.Transition {
				transitions++
			}
			calls[i] = e.runSequential(ctx, lf, r, ent, u, i)
		}
	}
	if wg != nil {
		wg.Wait()
	}
	e.collectSuspended(lf, r, uses, calls)
}

// startConcurrent starts the reply's concurrent tools, each on a goroutine
// of its own, and returns what to wait for (nil when there are none).
func (e *standard) startConcurrent(ctx context.Context, lf *leaf, r *StepResult, uses []message.Part, calls []*instance.SuspendedCall) *sync.WaitGroup {
	var wg *sync.WaitGroup // only a reply with concurrent tools needs one
	for i, u := range uses {
		ent, ok := lf.tools.lookup(u.Name)
		if !ok || !ent.tool.Concurrent {
			continue
		}
		if wg == nil {
			wg = new(sync.WaitGroup)
		}
		wg.Go(func() {
			_, r.Results[i], calls[i], _ = e.invoke(ctx, lf, ent, u, lf.in.State, nil)
		})
	}
	return wg
}

// runSequential runs the tool call u, the i-th of the reply, on the state
// the previous calls left, and records its result and writes in r. It
// returns the call when the tool suspended.
func (e *standard) runSequential(ctx context.Context, lf *leaf, r *StepResult, ent entry, u message.Part, i int) *instance.SuspendedCall {
	f, res, call, eff := e.invoke(ctx, lf, ent, u, r.State, r.Packs)
	r.Results[i] = res
	if res.IsError {
		return call
	}
	// A handler that suspends keeps the updates it made first.
	switch {
	case eff != nil:
		r.Transition = eff
	case f.Dirty && ent.scope == scopeOwn:
		r.State, r.StateChanged = f.State, true
	case f.Dirty && ent.scope == scopePack:
		if r.Packs == nil {
			r.Packs = map[string]any{}
		}
		r.Packs[ent.pack.Name()] = f.State
	}
	if ent.tool.Terminal {
		r.Terminal = true
	}
	return call
}

// collectSuspended lists the suspended calls in r, in tool-use order; a
// suspend ID already in use fails its call.
func (e *standard) collectSuspended(lf *leaf, r *StepResult, uses []message.Part, calls []*instance.SuspendedCall) {
	seen := map[string]bool{}
	for i, c := range calls {
		if c == nil {
			continue
		}
		if seen[c.SuspendID] || lf.taken(c.SuspendID) {
			r.Results[i] = message.ToolResult(uses[i].ID, fmt.Sprintf("%v: suspend ID %q", ErrDuplicateID, c.SuspendID), true)
			continue
		}
		seen[c.SuspendID] = true
		r.Suspended = append(r.Suspended, *c)
	}
}

// refuse is the error result of tool use u that no tool runs.
func (lf *leaf) refuse(u message.Part, text string) message.Part {
	res := message.ToolResult(u.ID, text, true)
	lf.toolFinished(u, lf.toolStarted(u), res, nil)
	return res
}

// invoke runs tool call u on state (and packs) and settles it: its result,
// its suspended call, or a transition's effect; the frame is nil when the
// call timed out. Listeners hear it start and finish.
func (e *standard) invoke(ctx context.Context, lf *leaf, ent entry, u message.Part, state any, packs map[string]any) (*frame.Frame, message.Part, *instance.SuspendedCall, *instance.Effect) {
	start := lf.toolStarted(u)
	f, out, err := e.call(ctx, lf, ent, u, state, packs)
	res, c, eff := e.settle(lf, ent, u, out, err)
	if c != nil {
		if err := lf.admitCall(ctx, c, err); err != nil {
			res, c = message.ToolResult(u.ID, err.Error(), true), nil
		}
	}
	lf.toolFinished(u, start, res, c)
	return f, res, c, eff
}

// call runs one tool call inside a span, within the tool's timeout. The
// frame is nil when the call timed out.
func (e *standard) call(ctx context.Context, lf *leaf, ent entry, u message.Part, state any, packs map[string]any) (*frame.Frame, any, error) {
	ctx, span := e.startTool(ctx, lf, ent, u)
	defer span.End()
	var start time.Time
	metered := e.met.ToolOn(ctx)
	if metered {
		start = time.Now()
	}
	f := e.newFrame(ctx, lf, ent, state, packs)
	f.KeyID = u.ID
	if ent.tool.Concurrent {
		f.ReadOnly = true
	}
	f, out, err := e.limit(ctx, f, handlerCall{tool: ent.tool, input: u.Data})
	if metered {
		e.met.Tool(ctx, u.Name, outcomeOf(err), time.Since(start))
	}
	if span.IsRecording() {
		outcome := outcomeOf(err)
		span.SetAttributes(attribute.String("markov.outcome", outcome))
		if err != nil && !isSuspension(err) {
			span.SetAttributes(semconv.ErrorTypeKey.String(toolErrorType(outcome)))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	return f, out, err
}

// startTool starts the span of tool call u, "execute_tool {name}" with
// the GenAI tool attributes beside markov's, unless the run is untraced.
func (e *standard) startTool(ctx context.Context, lf *leaf, ent entry, u message.Part) (context.Context, trace.Span) {
	if tracing.Off(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := e.tracer.Start(ctx, telemetry.ToolSpanName(u.Name))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("markov.tool", u.Name), attribute.String("markov.instance", lf.in.ID))
		span.SetAttributes(telemetry.ToolAttributes(u.Name, ent.tool.Spec.Description, u.ID)...)
	}
	return ctx, span
}

// toolErrorType is error.type of a failed tool call's outcome.
func toolErrorType(outcome string) string {
	if outcome == "timeout" {
		return "timeout"
	}
	return "tool_error"
}

func isSuspension(err error) bool {
	_, ok := errors.AsType[*instance.SuspendRequest](err)
	return ok
}

// outcomeOf names the outcome of a tool call for its span.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case isSuspension(err):
		return "suspended"
	case errors.Is(err, ErrToolTimeout):
		return "timeout"
	}
	return "error"
}

// newFrame returns the frame of a call of ent on state (and packs).
func (e *standard) newFrame(ctx context.Context, lf *leaf, ent entry, state any, packs map[string]any) *frame.Frame {
	f := lf.spareFrame(ent)
	*f = frame.Frame{Context: ctx, InstanceID: lf.in.ID, Messages: lf.transcript(), KeyScope: lf.root.ID, Journal: lf.journal}
	switch ent.scope {
	case scopeOwn:
		f.State, f.Ops = state, access.NodeOf(lf.node).Ops
	case scopeCharter:
		f.State, f.Ops, f.ReadOnly = state, access.NodeOf(lf.node).Ops, true
	case scopeAncestor:
		a := lf.ancestors[ent.ancestor]
		f.State, f.Ops, f.ReadOnly = a.State, access.NodeOf(e.nodes[a.Node]).Ops, true
	case scopePack:
		name := ent.pack.Name()
		s, ok := packs[name]
		if !ok {
			s = lf.root.Packs[name]
		}
		f.State, f.Ops, f.ReadOnly = s, access.PackOf(ent.pack).Ops, lf.node.Worker()
	}
	return f
}

// spareFrame returns the leaf's frame for a call of ent, once, unless ent
// is concurrent (its calls run on goroutines of their own), or a new one.
// A frame is never handed out twice: a handler may keep its tool context,
// or run on after its timeout.
func (lf *leaf) spareFrame(ent entry) *frame.Frame {
	if !ent.tool.Concurrent && lf.frame != nil {
		f := lf.frame
		lf.frame = nil
		return f
	}
	return new(frame.Frame)
}

// settle turns a handler's return into a tool result, a suspended call, or
// for a transition the validated effect.
func (e *standard) settle(lf *leaf, ent entry, u message.Part, out any, err error) (message.Part, *instance.SuspendedCall, *instance.Effect) {
	if sr, ok := errors.AsType[*instance.SuspendRequest](err); ok {
		if ent.tool.Transition {
			c := e.newCall(sr, lf.in.ID, instance.KindInstance, instance.ByTransition, u.Name, u.Data)
			return message.ToolResult(u.ID, "suspended: "+sr.Reason, false), &c, nil
		}
		c := e.newCall(sr, lf.in.ID, instance.KindTool, instance.ByTool, u.Name, u.Data)
		c.ToolUseID = u.ID
		if err := declarePayload(&c, ent.tool.Payload, ent.tool.Spec.InputSchema, sr); err != nil {
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
		text, err := e.validateEffect(&eff, lf)
		if err != nil {
			return message.ToolResult(u.ID, err.Error(), true), nil, nil
		}
		return message.ToolResult(u.ID, text, false), nil, &eff
	}
	return resultPart(u.ID, out, false), nil, nil
}

// resultPart is the tool result of a handler's value out.
func resultPart(toolUseID string, out any, isError bool) message.Part {
	text, err := instance.ResultText(out)
	if err != nil {
		return message.ToolResult(toolUseID, "result does not encode: "+err.Error(), true)
	}
	return message.ToolResult(toolUseID, text, isError)
}

// newCall builds the record of a suspension requested by sr.
func (e *standard) newCall(sr *instance.SuspendRequest, instanceID string, kind instance.CallKind, by instance.Initiator, name string, input json.RawMessage) instance.SuspendedCall {
	return frame.NewCall(sr, e.cfg.Clock(), e.cfg.NewID, instanceID, kind, by, name, input)
}

// declarePayload records the payload schema s (nil: none) on c and checks
// c's on-timeout payload against it, so a deadline cannot resolve the call
// with a payload a resume would be refused. On a call whose policy allows
// edits it records the input schema too, which an edit must satisfy.
func declarePayload(c *instance.SuspendedCall, s *frame.Schema, input json.RawMessage, sr *instance.SuspendRequest) error {
	if c.Policy != nil && c.Policy.AllowEdit {
		c.InputSchema = append(json.RawMessage(nil), input...)
	}
	if _, doubt := instance.InDoubtOf(sr.Metadata); (s == nil || doubt) && sr.PayloadSchema != nil {
		var err error
		if s, err = frame.ParseSchema(sr.PayloadSchema); err != nil {
			return fmt.Errorf("payload schema: %w", err)
		}
	}
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
