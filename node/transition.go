package node

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
)

// TransitionPrefix starts the tool name of a declared edge: node.To("review")
// is shown to the model as the tool "transition_to_review".
const TransitionPrefix = "transition_to_"

// CedeTool is the name of the transition Ceder builds.
const CedeTool = "cede"

// Transition is a way the model can move the tree from a node with state S,
// shown to it as a tool. At most one transition runs per reply.
type Transition[S any] struct {
	t       *frame.Tool
	targets []string
	// carries is the type of the state the transition hands its target
	// (ToWith), nil when it hands none.
	carries reflect.Type
}

// Edge is one possible move of a node's transition: the transition's tool
// name and a node it may lead to (a replacement or a spawned child). Graphs
// draw one arrow per edge.
type Edge struct {
	Transition string
	Target     string
	// State is the type of the state the transition hands the target
	// (ToWith); nil when the target starts from its initial state or the
	// model gives one. The charter checks that it is the target's state
	// type.
	State reflect.Type
}

// TransitionOption configures a code transition (NewTransition).
type TransitionOption interface{ applyTransition(*transitionConfig) }

type transitionConfig struct{ targets []string }

type transitionOption func(*transitionConfig)

func (o transitionOption) applyTransition(c *transitionConfig) { o(c) }

// Targets declares the nodes a code transition may lead to, by name: the
// nodes its effect moves to or spawns. The charter checks every name like a
// node.To target, and graphs (machine.Charter.Graph) draw an edge to each.
func Targets(names ...string) TransitionOption {
	return transitionOption(func(c *transitionConfig) { c.targets = append(c.targets, names...) })
}

// Name returns the transition's tool name ("" for the zero Transition).
func (t Transition[S]) Name() string {
	if t.t == nil {
		return ""
	}
	return t.t.Spec.Name
}

func (t Transition[S]) frameTool() *frame.Tool { return t.t }

func (t Transition[S]) edgeTargets() []string { return t.targets }

func (t Transition[S]) carried() reflect.Type { return t.carries }

// TransitionContext is what a code transition sees.
type TransitionContext[S any] struct {
	context.Context
	f *frame.Frame
}

func newTransitionContext[S any](f *frame.Frame) *TransitionContext[S] {
	return &TransitionContext[S]{Context: f.Context, f: f}
}

// State returns a copy of the instance's current state (writes to it are
// not kept).
func (c *TransitionContext[S]) State() S { return frame.State[S](c.f) }

// InstanceID returns the instance's ID.
func (c *TransitionContext[S]) InstanceID() string { return c.f.InstanceID }

// Suspend returns the suspension to hand back instead of an effect: the
// whole instance is parked until a ResumeInput names it, and the resume
// payload, if any, reaches the instance as a message.
func (c *TransitionContext[S]) Suspend(reason string, opts ...instance.SuspendOption) error {
	return frame.Suspend(reason, opts)
}

// To declares an edge to the node target, resolved by name through the
// charter. The model may pass the target's state as "state"; without it the
// target starts from its initial state. A To to the node itself resets it.
func To[S any](target, description string) Transition[S] {
	type input struct {
		State any `json:"state,omitempty" jsonschema:"the new node's state; omit to start from its initial state"`
	}
	fn := func(_ *TransitionContext[S], in input) (instance.Effect, error) {
		if in.State == nil {
			return instance.Goto(target, nil), nil
		}
		raw, err := json.Marshal(in.State)
		if err != nil {
			return instance.Effect{}, err
		}
		return instance.Goto(target, json.RawMessage(raw)), nil
	}
	t := newTransitionTool(TransitionPrefix+target, description, fn)
	return Transition[S]{t: t, targets: []string{target}}
}

// ToWith declares an edge to the node target whose state is carried over:
// when the model takes it, carry turns the instance's state into the
// target's, so data the two nodes share moves with the instance instead
// of being dropped (a plain To starts the target from its initial state).
// T must be the target's state type; the charter checks it. The model
// passes no arguments. For data every node shares whatever the path
// through the graph, use a pack (NewPack): its state lives on the root and
// no transition touches it.
func ToWith[S, T any](target, description string, carry func(S) T) Transition[S] {
	fn := func(ctx *TransitionContext[S], _ struct{}) (instance.Effect, error) {
		return instance.Goto(target, carry(ctx.State())), nil
	}
	t := newTransitionTool(TransitionPrefix+target, description, fn)
	return Transition[S]{t: t, targets: []string{target}, carries: reflect.TypeFor[T]()}
}

// NewTransition returns a code transition with typed arguments: fn returns
// the effect (instance.Goto, instance.Spawn, instance.Cede) or suspends the
// whole instance through ctx.Suspend. Targets declares the nodes it may
// lead to, so the charter checks them and graphs show them.
func NewTransition[S, Args any](name, description string, fn func(ctx *TransitionContext[S], args Args) (instance.Effect, error), opts ...TransitionOption) Transition[S] {
	var cfg transitionConfig
	for _, o := range opts {
		o.applyTransition(&cfg)
	}
	return Transition[S]{t: newTransitionTool(name, description, fn), targets: cfg.targets}
}

// Ceder returns the transition "cede": the model hands its result (the
// "content" argument) to the parent and the instance is removed.
func Ceder[S any](description string) Transition[S] {
	type input struct {
		Content string `json:"content" jsonschema:"the result to hand to the parent"`
	}
	return NewTransition(CedeTool, description, func(_ *TransitionContext[S], in input) (instance.Effect, error) {
		return instance.Cede(in.Content), nil
	})
}

func newTransitionTool[S, Args any](name, description string, fn func(*TransitionContext[S], Args) (instance.Effect, error)) *frame.Tool {
	t := newTool(name, description, newTransitionContext[S], fn, nil)
	t.Transition = true
	return t
}
