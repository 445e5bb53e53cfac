package machine

import (
	"fmt"
	"strconv"
	"strings"
)

// GraphFormat is a text format Charter.Graph can write.
type GraphFormat string

// The graph formats.
const (
	// GraphMermaid is a Mermaid state diagram (stateDiagram-v2).
	GraphMermaid GraphFormat = "mermaid"
	// GraphGraphviz is a Graphviz DOT digraph.
	GraphGraphviz GraphFormat = "graphviz"
)

// Graph writes the node graph in the given format: every node (a node no
// edge touches too), the first
// node as the start, and one arrow per edge the nodes declare (node.To, and
// each target of a code transition's node.Targets), labelled with the
// transition's tool name, in declaration order. Several edges between the
// same two nodes and self-loops are all drawn. An unknown format is an
// error wrapping ErrGraphFormat.
func (c *Charter) Graph(format GraphFormat) (string, error) {
	var b strings.Builder
	switch format {
	case GraphMermaid:
		id := c.mermaidIDs()
		b.WriteString("stateDiagram-v2\n")
		for _, name := range c.order {
			if id[name] == name {
				fmt.Fprintf(&b, "    %s\n", name)
			} else {
				fmt.Fprintf(&b, "    state %q as %s\n", name, id[name])
			}
		}
		fmt.Fprintf(&b, "    [*] --> %s\n", id[c.order[0]])
		c.eachEdge(func(from, transition, to string) {
			fmt.Fprintf(&b, "    %s --> %s: %s\n", id[from], id[to], transition)
		})
	case GraphGraphviz:
		b.WriteString("digraph charter {\n")
		b.WriteString("    \"[*]\" [shape=point];\n")
		for _, name := range c.order {
			fmt.Fprintf(&b, "    %s;\n", strconv.Quote(name))
		}
		fmt.Fprintf(&b, "    \"[*]\" -> %s;\n", strconv.Quote(c.order[0]))
		c.eachEdge(func(from, transition, to string) {
			fmt.Fprintf(&b, "    %s -> %s [label=%s];\n", strconv.Quote(from), strconv.Quote(to), strconv.Quote(transition))
		})
		b.WriteString("}\n")
	default:
		return "", fmt.Errorf("%w: %q", ErrGraphFormat, format)
	}
	return b.String(), nil
}

// eachEdge calls fn for every declared edge, nodes in declaration order,
// each node's edges in transition order.
func (c *Charter) eachEdge(fn func(from, transition, to string)) {
	for _, name := range c.order {
		for _, e := range c.nodes[name].Edges() {
			fn(name, e.Transition, e.Target)
		}
	}
}

// mermaidIDs maps node names to Mermaid state IDs: the name itself, or,
// for a name with a hyphen (which Mermaid reads as part of an arrow), the
// name with underscores, lengthened until no other node or state has it. Such a
// state is declared with its real name as label.
func (c *Charter) mermaidIDs() map[string]string {
	ids := make(map[string]string, len(c.order))
	taken := make(map[string]bool, len(c.order))
	for _, name := range c.order {
		taken[name] = true
	}
	for _, name := range c.order {
		id := name
		if strings.Contains(name, "-") {
			id = strings.ReplaceAll(name, "-", "_")
			for taken[id] {
				id += "_"
			}
			taken[id] = true
		}
		ids[name] = id
	}
	return ids
}
