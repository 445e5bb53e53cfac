package node_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/node"
)

func TestEdgesListDeclaredAndCodeTargets(t *testing.T) {
	type s struct{}
	pick := node.NewTransition("pick", "", func(*node.TransitionContext[s], struct{}) (instance.Effect, error) {
		return instance.Goto("b", nil), nil
	}, node.Targets("b"), node.Targets("c"))
	free := node.NewTransition("free", "", func(*node.TransitionContext[s], struct{}) (instance.Effect, error) {
		return instance.Effect{}, nil
	})
	n, err := node.New("a", node.Config[s]{Transitions: []node.Transition[s]{node.To[s]("b", ""), pick, free, node.To[s]("a", "")}})
	require.NoError(t, err)
	want := []node.Edge{
		{Transition: "transition_to_b", Target: "b"},
		{Transition: "pick", Target: "b"},
		{Transition: "pick", Target: "c"},
		{Transition: "transition_to_a", Target: "a"},
	}
	if diff := cmp.Diff(want, n.Edges()); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
}
