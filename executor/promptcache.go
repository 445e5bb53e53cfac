package executor

import (
	"sync/atomic"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/node"
)

// The default prompt of a leaf changes only with what it is built from.
// For a leaf without packs, that is the charter's instructions and the
// node (both fixed), the leaf's state and its ancestors' nodes, IDs and
// states: when every one of those states has a type that holds no
// references they are compared with ==, and the last prompt built for the
// node is reused while they are the same (a hundred workers under one
// parent build it once).

// promptEntry is a node's last default prompt and what it was built
// from.
type promptEntry struct {
	state     any
	ancestors []ancestorKey
	text      string
}

// ancestorKey is what the default prompt shows of an ancestor.
type ancestorKey struct {
	node, id string
	state    any
}

// promptSlots returns a cache slot for every node whose state type holds
// no references.
func promptSlots(nodes []*node.Node) map[string]*atomic.Pointer[promptEntry] {
	out := map[string]*atomic.Pointer[promptEntry]{}
	for _, n := range nodes {
		if t := n.StateType(); t != nil && frame.Plain(t) {
			out[n.Name()] = new(atomic.Pointer[promptEntry])
		}
	}
	return out
}

// systemPrompt builds the leaf's system prompt, reusing the node's last
// default prompt when nothing it is built from has changed.
func (e *standard) systemPrompt(p *PromptContext) (string, error) {
	slot := e.prompts[p.Node.Name()]
	if slot == nil || len(p.Node.Packs()) > 0 || !e.plainAncestors(p.Ancestors) {
		return e.prompt(p)
	}
	if c := slot.Load(); c != nil && c.state == p.State && sameAncestors(c.ancestors, p.Ancestors) {
		return c.text, nil
	}
	text, err := e.prompt(p)
	if err == nil {
		entry := &promptEntry{state: p.State, text: text, ancestors: make([]ancestorKey, len(p.Ancestors))}
		for i, a := range p.Ancestors {
			entry.ancestors[i] = ancestorKey{node: a.Node, id: a.ID, state: a.State}
		}
		slot.Store(entry)
	}
	return text, err
}

// plainAncestors reports whether every ancestor's node has a state type
// that holds no references (so its state compares with ==).
func (e *standard) plainAncestors(ancestors []*instance.Instance) bool {
	for _, a := range ancestors {
		if e.prompts[a.Node] == nil {
			return false
		}
	}
	return true
}

// sameAncestors reports whether ancestors are those keys describe.
func sameAncestors(keys []ancestorKey, ancestors []*instance.Instance) bool {
	if len(keys) != len(ancestors) {
		return false
	}
	for i, a := range ancestors {
		if k := keys[i]; k.node != a.Node || k.id != a.ID || k.state != a.State {
			return false
		}
	}
	return true
}
