package instance_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
)

func TestPaths(t *testing.T) {
	leaf := &instance.Instance{ID: "leaf"}
	mid := &instance.Instance{ID: "mid", Children: []*instance.Instance{{ID: "other"}, leaf}}
	root := &instance.Instance{ID: "root", Children: []*instance.Instance{{ID: "first"}, mid}}

	want := []*instance.Instance{root, mid, leaf}
	require.Equal(t, want, root.Path("leaf"))
	require.Equal(t, want, root.PathTo(leaf))
	require.Equal(t, []*instance.Instance{root}, root.PathTo(root))

	copyOf := *leaf
	require.Nil(t, root.PathTo(&copyOf), "a copy is not the tree's instance")
	require.Nil(t, root.Path("nowhere"))
}

func TestCloneIsDeepAndIndependent(t *testing.T) {
	tree := func() *instance.Instance {
		return &instance.Instance{ID: "root", Node: "r", Packs: map[string]any{"p": 1}, Children: []*instance.Instance{
			{ID: "a", Node: "n", State: 1, Children: []*instance.Instance{{ID: "a1"}, {ID: "a2"}}},
			{ID: "b", Node: "n", Children: []*instance.Instance{}},
			{ID: "c", Node: "n", Suspension: &instance.SuspensionState{Calls: []instance.SuspendedCall{{SuspendID: "s"}}}},
		}}
	}
	orig := tree()
	c := orig.Clone(func(node string, s any) any { return s })
	require.Equal(t, tree(), c)
	require.NotNil(t, c.Children[1].Children, "an empty children list stays empty, not nil")

	// The copies' children lists are carved from one array: an append to
	// one moves it out, and leaves its neighbours and the original alone.
	a := c.Children[0]
	c.Children = append(c.Children, &instance.Instance{ID: "d"})
	a.Children = append(a.Children, &instance.Instance{ID: "a3"})
	c.Children[1].Children = append(c.Children[1].Children, &instance.Instance{ID: "b1"})
	require.Equal(t, []string{"a", "b", "c", "d"}, ids(c.Children))
	require.Equal(t, []string{"a1", "a2", "a3"}, ids(a.Children))
	require.Equal(t, []string{"b1"}, ids(c.Children[1].Children))
	c.Children[2].Suspension.Calls[0].SuspendID = "changed"
	c.Packs["p"] = 2
	require.Equal(t, tree(), orig)
}

func ids(in []*instance.Instance) []string {
	out := make([]string, len(in))
	for i, n := range in {
		out[i] = n.ID
	}
	return out
}
