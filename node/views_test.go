package node_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/node"
)

// TestViewsCannotChangeTheNode: what a node describes of itself — tools,
// commands, packs, edges — is a copy; writing to it leaves the node as it
// was.
func TestViewsCannotChangeTheNode(t *testing.T) {
	type s struct{}
	type in struct {
		Text string `json:"text"`
	}
	echo := node.NewTool("echo", "echo", func(_ *node.ToolContext[s], i in) (string, error) { return i.Text, nil },
		node.ResumeWith[in]())
	ping := command.New("ping", "ping", func(*command.Context[s], in) (string, error) { return "pong", nil },
		command.ResumeWith[in]())
	notes := node.NewPack("notes", "shared notes", s{},
		node.NewPackTool("jot", "jot", func(*node.PackContext[s], in) (string, error) { return "", nil }),
		node.PackCommand(command.New("wipe", "wipe", func(*command.Context[s], in) (string, error) { return "", nil })))
	n, err := node.New("n", node.Config[s]{
		Tools:       []node.Tool[s]{echo},
		Transitions: []node.Transition[s]{node.To[s]("n", "again")},
		Commands:    []command.Command[s]{ping},
		Packs:       []*node.Pack{notes},
	})
	require.NoError(t, err)
	tools, cmds, packs, edges := n.Tools(), n.Commands(), n.Packs(), n.Edges()
	packTools, packCmds := notes.Tools(), notes.Commands()

	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'x'
		}
	}
	n.Tools()[0].Spec.Name = "renamed"
	scribble(n.Tools()[0].Spec.InputSchema)
	scribble(n.Tools()[0].PayloadSchema)
	n.Tools()[1].Transition = false
	n.Commands()[0].Name = "renamed"
	scribble(n.Commands()[0].InputSchema)
	scribble(n.Commands()[0].PayloadSchema)
	n.Packs()[0] = nil
	n.Edges()[0].Target = "elsewhere"
	notes.Tools()[0].Spec.Name = "renamed"
	notes.Commands()[0].Name = "renamed"

	require.Equal(t, tools, n.Tools())
	require.Equal(t, cmds, n.Commands())
	require.Equal(t, packs, n.Packs())
	require.Equal(t, edges, n.Edges())
	require.Equal(t, packTools, notes.Tools())
	require.Equal(t, packCmds, notes.Commands())
	require.Equal(t, "echo", tools[0].Spec.Name)
	require.True(t, tools[1].Transition)
	require.NotEmpty(t, tools[0].PayloadSchema)
	require.NotEmpty(t, cmds[0].PayloadSchema)
}
