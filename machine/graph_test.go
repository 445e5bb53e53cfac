package machine_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

var updateGraphs = flag.Bool("update-graphs", false, "rewrite machine/testdata/graph.* from the current output")

// graphCharter has every kind of edge: declared (node.To), a self-loop,
// a code transition with several targets, two edges between the same pair
// of nodes, a spawn, and a node name Mermaid cannot take as an ID.
func graphCharter(t *testing.T) *machine.Charter {
	t.Helper()
	type none struct{}
	finish := node.NewTransition("finish", "Send the draft on or close it.",
		func(_ *node.TransitionContext[empty], in struct{ Ready bool }) (instance.Effect, error) {
			if in.Ready {
				return instance.Goto("done", nil), nil
			}
			return instance.Goto("review", nil), nil
		}, node.Targets("review", "done"))
	research := node.NewTransition("research", "Spawn a researcher.",
		func(*node.TransitionContext[empty], none) (instance.Effect, error) {
			return instance.Spawn(instance.Child{Node: "fact-check"}), nil
		}, node.Targets("fact-check"))
	draft := mustNode(t, "draft", node.Config[empty]{Transitions: []node.Transition[empty]{
		node.To[empty]("review", "Ask for a review."),
		node.To[empty]("draft", "Start over."),
		finish,
		research,
	}})
	review := mustNode(t, "review", node.Config[empty]{Transitions: []node.Transition[empty]{
		node.To[empty]("draft", "Send it back."),
		node.NewTransition("verdict", "Decide.",
			func(*node.TransitionContext[empty], none) (instance.Effect, error) {
				return instance.Goto("done", nil), nil
			}, node.Targets("draft", "done")),
	}})
	researcher := mustNode(t, "fact-check", node.Config[empty]{Worker: true,
		Transitions: []node.Transition[empty]{node.Ceder[empty]("Report back.")}})
	done := mustNode(t, "done", node.Config[empty]{})
	// fact_check shares the Mermaid ID fact-check would get.
	factCheck := mustNode(t, "fact_check", node.Config[empty]{})
	return charter(t, scripted.New(), draft, review, researcher, done, factCheck)
}

func TestGraphGolden(t *testing.T) {
	ch := graphCharter(t)
	for _, tc := range []struct {
		format machine.GraphFormat
		file   string
	}{
		{machine.GraphMermaid, "graph.mmd"},
		{machine.GraphGraphviz, "graph.dot"},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			got, err := ch.Graph(tc.format)
			require.NoError(t, err)
			path := filepath.Join("testdata", tc.file)
			if *updateGraphs {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s graph (-want +got):\n%s", tc.format, diff)
			}
		})
	}
}

func TestGraphUnknownFormat(t *testing.T) {
	_, err := graphCharter(t).Graph("svg")
	require.ErrorIs(t, err, machine.ErrGraphFormat)
}

func TestCodeTransitionTargetsAreChecked(t *testing.T) {
	n := mustNode(t, "n", node.Config[empty]{Transitions: []node.Transition[empty]{
		node.NewTransition("go", "", func(*node.TransitionContext[empty], struct{}) (instance.Effect, error) {
			return instance.Goto("nowhere", nil), nil
		}, node.Targets("nowhere")),
	}})
	_, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(), Nodes: []*node.Node{n}})
	require.ErrorIs(t, err, machine.ErrInvalidCharter)
	require.ErrorContains(t, err, `"nowhere"`)
}
