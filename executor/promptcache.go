package executor

import (
	"sync/atomic"

	"github.com/markov-agents/markov/internal/frame"
	"github.com/markov-agents/markov/node"
)

// The default prompt of a leaf changes only with what it is built from.
// For a leaf with no ancestors and no packs, that is the charter's
// instructions and the node (both fixed) and the leaf's state: when the
// state's type holds no references it is compared with ==, and the last
// prompt built for the node is reused while the state is the same.

// promptEntry is a node's last default prompt and the state it was built
// for.
type promptEntry struct {
	state any
	text  string
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
	if slot == nil || len(p.Ancestors) > 0 || len(p.Node.Packs()) > 0 {
		return e.prompt(p)
	}
	if c := slot.Load(); c != nil && c.state == p.State {
		return c.text, nil
	}
	text, err := e.prompt(p)
	if err == nil {
		slot.Store(&promptEntry{state: p.State, text: text})
	}
	return text, err
}
