package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/message"
)

// systemRecorder ends every turn and keeps the system prompts it was sent.
type systemRecorder struct{ systems []string }

func (r *systemRecorder) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	r.systems = append(r.systems, req.System)
	return &llm.Response{Message: message.Message{Parts: []message.Part{message.Text("ok")}}, StopReason: llm.EndTurn}, nil
}

// TestDefaultPromptFollowsState checks that the default prompt, reused
// while a leaf's state is unchanged, is rebuilt for every new state, and
// is what a fresh executor builds for the same state.
func TestDefaultPromptFollowsState(t *testing.T) {
	model := &systemRecorder{}
	e := newExecutor(t, model)
	for _, n := range []int{1, 1, 2, 1} {
		step(t, e, tree(n))
	}
	fresh := &systemRecorder{}
	for _, n := range []int{1, 1, 2, 1} {
		step(t, newExecutor(t, fresh), tree(n))
	}
	require.Equal(t, fresh.systems, model.systems)
	require.Equal(t, model.systems[0], model.systems[1])
	require.NotEqual(t, model.systems[1], model.systems[2])
	require.Contains(t, model.systems[2], `{"n":2}`)
	require.Equal(t, model.systems[0], model.systems[3])
}

// TestDefaultPromptFollowsAncestors checks that the prompt a leaf reuses
// from its node's last one is rebuilt when an ancestor's state, ID or
// node changes, and is what a fresh executor builds.
func TestDefaultPromptFollowsAncestors(t *testing.T) {
	leafUnder := func(id string, n int) *instance.Instance {
		return &instance.Instance{ID: id, Node: "desk", State: counter{N: n}, Children: []*instance.Instance{{ID: "leaf", Node: "desk", State: counter{N: 7}}}}
	}
	trees := []*instance.Instance{leafUnder("root", 1), leafUnder("root", 1), leafUnder("root", 2), leafUnder("boss", 2), leafUnder("root", 1)}
	run := func(e executor.Executor) {
		for _, root := range trees {
			leaf := root.Children[0]
			_, err := e.Step(context.Background(), &executor.StepRequest{Root: root, Instance: leaf, Transcript: []message.Message{message.UserText("go")}})
			require.NoError(t, err)
		}
	}
	model, fresh := &systemRecorder{}, &systemRecorder{}
	run(newExecutor(t, model))
	for _, root := range trees {
		_, err := newExecutor(t, fresh).Step(context.Background(), &executor.StepRequest{Root: root, Instance: root.Children[0], Transcript: []message.Message{message.UserText("go")}})
		require.NoError(t, err)
	}
	require.Equal(t, fresh.systems, model.systems)
	require.Equal(t, model.systems[0], model.systems[1])
	require.NotEqual(t, model.systems[1], model.systems[2])
	require.Contains(t, model.systems[2], "## Ancestor desk (root)\n{\"n\":2}")
	require.Contains(t, model.systems[3], "## Ancestor desk (boss)")
	require.Equal(t, model.systems[0], model.systems[4])
}
