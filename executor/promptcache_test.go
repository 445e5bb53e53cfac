package executor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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
