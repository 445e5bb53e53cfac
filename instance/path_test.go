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
