package executor

import (
	"encoding/json"
	"strings"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/node"
)

// PromptBuilder builds a leaf's system prompt: the extension point for a
// charter's own prompts (machine.CharterConfig.SystemPrompt), which may
// call DefaultPrompt and add to it. It runs once per leaf per step,
// concurrently for the leaves of a round: it must not retain or modify its
// argument or anything it points to.
type PromptBuilder func(p *PromptContext) (string, error)

// PromptContext is everything a prompt builder may use.
type PromptContext struct {
	// Instructions are the charter's instructions.
	Instructions string
	// Node is the leaf's node.
	Node *node.Node
	// InstanceID is the leaf's instance ID.
	InstanceID string
	// State is the leaf's state.
	State any
	// Ancestors are the leaf's ancestors, root first (none for the root).
	Ancestors []*instance.Instance
	// Packs are the pack states of the tree, by pack name; the node's
	// packs are Node.Packs().
	Packs map[string]any
	// Transitions are the transition tools available to the leaf.
	Transitions []llm.ToolSpec
}

// DefaultPrompt is the prompt builder a charter uses unless told
// otherwise: the charter instructions, the node instructions, the state as
// JSON, the available transitions, the ancestors' context and the pack
// states. When it is the executor's builder, the executor keeps the last
// prompt of each node and reuses it while nothing it is built from has
// changed (a leaf with no ancestors or packs, whose state holds no
// references and compares equal).
func DefaultPrompt(p *PromptContext) (string, error) {
	var b strings.Builder
	b.Grow(len(p.Instructions) + len(p.Node.Instructions()) + 256)
	section := func(s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(s)
	}
	section(p.Instructions)
	section(p.Node.Instructions())
	if p.State != nil && p.Node.StateType().Size() > 0 {
		if err := writeJSONSection(&b, "## State", p.State); err != nil {
			return "", err
		}
	}
	if len(p.Transitions) > 0 {
		b.WriteString("\n\n## Transitions")
		for _, t := range p.Transitions {
			b.WriteString("\n- ")
			b.WriteString(t.Name)
			if t.Description != "" {
				b.WriteString(": ")
				b.WriteString(t.Description)
			}
		}
	}
	for _, a := range p.Ancestors {
		if err := writeJSONSection(&b, "## Ancestor "+a.Node+" ("+a.ID+")", a.State); err != nil {
			return "", err
		}
	}
	for _, pack := range p.Node.Packs() {
		title := "## Pack " + pack.Name()
		if d := pack.Description(); d != "" {
			title += ": " + d
		}
		if err := writeJSONSection(&b, title, p.Packs[pack.Name()]); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

func writeJSONSection(b *strings.Builder, title string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString(title)
	b.WriteByte('\n')
	b.Write(data)
	return nil
}
