package executor

import (
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/node"
)

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
	ancestor int // index into Leaf.Ancestors for scopeAncestor
	pack     *node.Pack
}

// Toolset is the tools one leaf may call, resolved once per node chain and
// reused every round.
type Toolset struct {
	// Specs are the tool specs sent to the model, in order.
	Specs []llm.ToolSpec
	// Transitions are the transition tool specs (for the prompt).
	Transitions []llm.ToolSpec
	entries     []entry
	byName      map[string]int
}

// NewToolset resolves the tools of a leaf running n under ancestors (root
// first): the node's tools and transitions, its packs' tools, its
// ancestors' own tools (nearest first; read-only) and the charter's tools.
// A name already taken shadows later ones, so the node's own tools win.
func NewToolset(n *node.Node, ancestors []*node.Node, charterTools []*frame.Tool) *Toolset {
	ts := &Toolset{byName: map[string]int{}}
	add := func(e entry) {
		name := e.tool.Spec.Name
		if _, ok := ts.byName[name]; ok {
			return
		}
		ts.byName[name] = len(ts.entries)
		ts.entries = append(ts.entries, e)
		ts.Specs = append(ts.Specs, e.tool.Spec)
		if e.tool.Transition {
			ts.Transitions = append(ts.Transitions, e.tool.Spec)
		}
	}
	for _, t := range n.Tools() {
		add(entry{tool: t, scope: scopeOwn})
	}
	for _, p := range n.Packs() {
		for _, t := range p.Tools() {
			add(entry{tool: t, scope: scopePack, pack: p})
		}
	}
	for i := len(ancestors) - 1; i >= 0; i-- {
		for _, t := range ancestors[i].OwnTools() {
			add(entry{tool: t, scope: scopeAncestor, ancestor: i})
		}
	}
	for _, t := range charterTools {
		add(entry{tool: t, scope: scopeCharter})
	}
	return ts
}

func (ts *Toolset) lookup(name string) (entry, bool) {
	i, ok := ts.byName[name]
	if !ok {
		return entry{}, false
	}
	return ts.entries[i], true
}
