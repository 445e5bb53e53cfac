// Package node defines nodes, the blueprints of agent behaviour: the
// instructions, typed state, tools, transitions, commands and packs an
// instance of the node runs with.
//
// # State evolution
//
// A node's state type S is also its persisted form: serialize stores
// states by their field names and decodes them strictly, so a state saved
// with a field that S no longer has (renamed or removed) fails to load,
// with an error naming the fields, rather than loading without its data.
// When S changes that way, raise Config.StateVersion and give
// Config.Migrate, which receives every state saved at an older version as
// JSON, with the version it was saved at, and returns the current S:
//
//	type cart struct {
//		Entries []string `json:"entries"` // was Items `json:"items"` in version 0
//	}
//	node.Config[cart]{
//		StateVersion: 1,
//		Migrate: func(from int, raw json.RawMessage) (cart, error) {
//			var old struct {
//				Items []string `json:"items"`
//			}
//			if err := json.Unmarshal(raw, &old); err != nil {
//				return cart{}, err
//			}
//			return cart{Entries: old.Items}, nil
//		},
//	}
//
// Adding a field needs no new version: states saved without it load with
// its zero value. A migration error fails the load with an error wrapping
// ErrMigration and instance.ErrInvalidState. A pack's state evolves the
// same way, with a PackMigration member.
package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/access"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/internal/mergepatch"
	"github.com/markov-agents/markov/llm"
)

// UpdateStateTool is the name of the built-in tool that updates a node's
// state with a JSON Merge Patch (RFC 7396). Nodes offer it only when
// Config.StateTool is set.
const UpdateStateTool = "update_state"

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName reports whether s is usable as a node, tool or command name by
// every provider: 1 to 64 letters, digits, '_' or '-'.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Config describes a node with state S. The zero value of every field is a
// usable default.
type Config[S any] struct {
	// Instructions are the node's part of the system prompt.
	Instructions string
	// Initial is the state of a new instance.
	Initial S
	// Validate checks every state the node takes on (nil: any S is valid).
	Validate func(S) error
	// Tools the model may call.
	Tools []Tool[S]
	// Transitions the model may take, shown to it as tools.
	Transitions []Transition[S]
	// Commands users may invoke.
	Commands []command.Command[S]
	// Packs the node opts into.
	Packs []*Pack
	// Worker nodes run beside the primary leaf, get no user input, may not
	// write pack state and must cede when done.
	Worker bool
	// Settings override the charter's model settings field by field.
	Settings llm.Settings
	// Output, when set, asks the model for structured output.
	Output *OutputSpec
	// StateTool offers the model the built-in update_state tool, which
	// writes any field of the state (JSON Merge Patch, validated). It is off
	// by default: a model that can write every field can also write the
	// ones meant for humans, such as an approval status. Enable it only on
	// nodes whose whole state the model may own.
	StateTool bool
	// StateVersion is the version of S as persisted (0: unversioned).
	// Raise it, with Migrate, when S changes so that states saved before
	// no longer decode into it: a field renamed, removed or retyped.
	StateVersion int
	// Migrate turns a state saved at an older StateVersion (from) into an
	// S. raw is the saved state as JSON, with the field names it was saved
	// with. Required when StateVersion is above 0; a returned state is
	// validated like any other.
	Migrate func(from int, raw json.RawMessage) (S, error)
}

// Node is a built node, ready for a charter. It is immutable and safe for
// concurrent use; what its accessors return are copies.
type Node struct {
	name         string
	instructions string
	initial      any
	stateType    reflect.Type
	decode       func(json.RawMessage) (any, error)
	evo          evolution
	// x holds the type-erased tools, commands and state operations (the
	// executor reaches them through internal/access).
	x        access.Node
	packs    []*Pack
	worker   bool
	settings llm.Settings
	output   *OutputSpec
	edges    []Edge
}

func init() {
	access.NodeOf = func(v any) *access.Node { return &v.(*Node).x }
	access.PackOf = func(v any) *access.Pack { return &v.(*Pack).x }
	access.ToolOf = func(v any) *frame.Tool { return v.(erasedTool).erased() }
}

// New builds a node. It checks names (unique, provider-safe), tool and
// command input schemas, resume handlers and the initial state.
func New[S any](name string, cfg Config[S]) (*Node, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: node name %q", ErrInvalidNode, name)
	}
	n := &Node{
		name:         name,
		instructions: cfg.Instructions,
		initial:      cfg.Initial,
		stateType:    reflect.TypeFor[S](),
		x:            access.Node{Ops: frame.OpsFor(cfg.Validate)},
		packs:        cfg.Packs,
		worker:       cfg.Worker,
		settings:     cfg.Settings,
		output:       cfg.Output,
	}
	if err := setState(n, cfg); err != nil {
		return nil, err
	}
	seen, err := n.addTools(erase(cfg.Tools), erase(cfg.Transitions), cfg.StateTool)
	if err == nil {
		n.x.Commands, err = commandsOf(cfg.Commands, seen)
	}
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	if cfg.Output != nil && cfg.Output.err != nil {
		return nil, fmt.Errorf("%w: node %s: output: %w", ErrInvalidNode, name, cfg.Output.err)
	}
	if slices.Contains(cfg.Packs, nil) {
		return nil, fmt.Errorf("%w: node %s: nil pack", ErrInvalidNode, name)
	}
	return n, nil
}

// setState sets up the state of n from cfg: its evolution, its strict
// decoder, and the check of the initial state.
func setState[S any](n *Node, cfg Config[S]) error {
	var err error
	if n.evo, err = newEvolution("node "+n.name, cfg.StateVersion, cfg.Migrate, n.x.Ops); err != nil {
		return err
	}
	n.decode = func(raw json.RawMessage) (any, error) {
		var s S
		if err := strictUnmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: %s state: %v", instance.ErrInvalidState, n.name, err)
		}
		if err := n.x.Ops.Validate(s); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := n.x.Ops.Validate(cfg.Initial); err != nil {
		return fmt.Errorf("%w: node %s: initial state: %w", ErrInvalidNode, n.name, err)
	}
	return nil
}

// erasable is a Tool[S] or a Transition[S].
type erasable interface {
	frameTool() *frame.Tool
	edgeTargets() []string
	carried() reflect.Type
}

// erase returns the type-erased forms of tools or transitions.
func erase[T erasable](ts []T) []erasable {
	out := make([]erasable, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

// addTools adds the node's tools, the built-in update_state tool (with
// stateTool, for a state with fields) and the transitions, and records
// the transitions' edges. It returns the names taken.
func (n *Node) addTools(tools, transitions []erasable, stateTool bool) (map[string]bool, error) {
	for _, t := range tools {
		if t.frameTool() == nil {
			return nil, fmt.Errorf("%w: zero Tool (build tools with node.NewTool)", ErrInvalidNode)
		}
		n.x.Own = append(n.x.Own, t.frameTool())
	}
	n.x.Tools = append(n.x.Tools, n.x.Own...)
	if stateTool && n.stateType.Size() > 0 {
		n.x.Tools = append(n.x.Tools, updateStateTool(n))
	}
	for _, t := range transitions {
		ft := t.frameTool()
		if ft == nil {
			return nil, fmt.Errorf("%w: zero Transition (build them with node.To or node.NewTransition)", ErrInvalidNode)
		}
		n.x.Tools = append(n.x.Tools, ft)
		for _, target := range t.edgeTargets() {
			n.edges = append(n.edges, Edge{Transition: ft.Spec.Name, Target: target, State: t.carried()})
		}
	}
	seen := map[string]bool{}
	for _, t := range n.x.Tools {
		if err := checkTool(t, seen); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

// commandsOf returns the type-erased forms of cs, checking their names
// against (and adding them to) seen, which tools and commands share.
func commandsOf[S any](cs []command.Command[S], seen map[string]bool) ([]*frame.Command, error) {
	out := make([]*frame.Command, 0, len(cs))
	for _, c := range cs {
		fc := access.CommandOf(c)
		if fc == nil {
			return nil, fmt.Errorf("%w: zero Command (build commands with command.New)", ErrInvalidNode)
		}
		if err := checkName("command", fc.Name, fc.Err, seen); err != nil {
			return nil, err
		}
		out = append(out, fc)
	}
	return out, nil
}

func checkTool(t *frame.Tool, seen map[string]bool) error {
	return checkName("tool", t.Spec.Name, t.Err, seen)
}

func checkName(kind, name string, err error, seen map[string]bool) error {
	if err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrInvalidNode, kind, name, err)
	}
	if !ValidName(name) {
		return fmt.Errorf("%w: %s name %q", ErrInvalidNode, kind, name)
	}
	if seen[name] {
		return fmt.Errorf("%w: duplicate name %q", ErrInvalidNode, name)
	}
	seen[name] = true
	return nil
}

func strictUnmarshal(raw []byte, v any) error {
	if len(raw) == 0 {
		return errors.New("empty state")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after state")
	}
	return nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Instructions returns the node's instructions.
func (n *Node) Instructions() string { return n.instructions }

// Worker reports whether the node is a worker.
func (n *Node) Worker() bool { return n.worker }

// Settings returns the node's model settings.
func (n *Node) Settings() llm.Settings { return n.settings }

// Output returns the node's structured-output spec, or nil.
func (n *Node) Output() *OutputSpec { return n.output }

// Initial returns a copy of the node's initial state.
func (n *Node) Initial() any { return n.x.Ops.Clone(n.initial) }

// StateType returns the node's state type S.
func (n *Node) StateType() reflect.Type { return n.stateType }

// ValidateState checks that v is a valid state of this node.
func (n *Node) ValidateState(v any) error { return n.x.Ops.Validate(v) }

// CloneState deep-copies a state value of this node.
func (n *Node) CloneState(v any) any { return n.x.Ops.Clone(v) }

// DecodeState decodes JSON into a validated state of this node.
func (n *Node) DecodeState(raw json.RawMessage) (any, error) { return n.decode(raw) }

// StateVersion returns the version of the node's persisted state
// (Config.StateVersion).
func (n *Node) StateVersion() int { return n.evo.version }

// MigrateState turns a state saved at state version from, below the
// node's, into a valid state of this node with Config.Migrate; raw is the
// saved state as JSON. Errors wrap ErrMigration and
// instance.ErrInvalidState.
func (n *Node) MigrateState(from int, raw json.RawMessage) (any, error) {
	return n.evo.migrateState(from, raw)
}

// NormalizeState turns a state given to a transition into a valid state of
// this node: nil is the initial state, raw JSON is decoded, anything else
// must already be an S.
func (n *Node) NormalizeState(v any) (any, error) {
	switch s := v.(type) {
	case nil:
		return n.Initial(), nil
	case json.RawMessage:
		if len(s) == 0 || string(s) == "null" {
			return n.Initial(), nil
		}
		return n.decode(s)
	}
	if err := n.x.Ops.Validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

// Tools describes the tools the model sees on this node, in order: its
// own tools, update_state (when Config.StateTool is set), then
// transitions. The descriptions are copies: changing them changes nothing.
func (n *Node) Tools() []ToolInfo { return toolInfos(n.x.Tools) }

// Commands describes the node's commands (copies).
func (n *Node) Commands() []command.Info { return commandInfos(n.x.Commands) }

// Packs returns the packs the node opts into (a copy of the list).
func (n *Node) Packs() []*Pack { return slices.Clone(n.packs) }

// Edges returns the node's declared edges in transition order: one per
// node.To, one per target a code transition declares (node.Targets).
func (n *Node) Edges() []Edge { return slices.Clone(n.edges) }

// updateStateTool builds the built-in state update tool of n.
func updateStateTool(n *Node) *frame.Tool {
	type input struct {
		Patch map[string]any `json:"patch" jsonschema:"JSON Merge Patch (RFC 7396) applied to the state: fields set replace, null removes"`
	}
	schema, err := frame.SchemaFor[input]()
	t := &frame.Tool{Err: err, InType: reflect.TypeFor[input]()}
	t.Spec = llm.ToolSpec{
		Name:        UpdateStateTool,
		Description: "Update this node's state with a JSON Merge Patch. The new state is validated; an invalid update changes nothing.",
	}
	if err != nil {
		return t
	}
	t.Spec.InputSchema = schema.Raw
	t.Run = func(f *frame.Frame, data json.RawMessage) (any, error) {
		in, err := frame.Decode[input](schema, data)
		if err != nil {
			return nil, err
		}
		if f.ReadOnly {
			return nil, instance.ErrReadOnly
		}
		cur, err := json.Marshal(f.State)
		if err != nil {
			return nil, err
		}
		patch, err := json.Marshal(in.Patch)
		if err != nil {
			return nil, err
		}
		next, err := mergepatch.Apply(cur, patch)
		if err != nil {
			return nil, err
		}
		s, err := n.decode(next)
		if err != nil {
			return nil, err
		}
		f.State, f.Dirty = s, true
		return "state updated", nil
	}
	return t
}
