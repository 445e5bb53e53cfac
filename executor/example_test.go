package executor_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

// counting wraps an executor and counts the steps it runs. Embedding the
// interface passes Resume and Command through unchanged, and requests
// keep every field they will gain.
type counting struct {
	executor.Executor
	steps atomic.Int64
}

func (c *counting) Step(ctx context.Context, req *executor.StepRequest) (*executor.StepResult, error) {
	c.steps.Add(1)
	return c.Executor.Step(ctx, req)
}

// A charter runs its leaves through the executor it is given: here the
// standard one, wrapped.
func ExampleNew() {
	greet, err := node.New("greet", node.Config[struct{}]{Instructions: "Greet the user."})
	if err != nil {
		panic(err)
	}
	nodes := []*node.Node{greet}
	std := executor.New(executor.Config{Model: scripted.New(scripted.Text("Hello!")), Nodes: nodes})
	wrapped := &counting{Executor: std}
	charter, err := machine.NewCharter(machine.CharterConfig{Nodes: nodes, Executor: wrapped})
	if err != nil {
		panic(err)
	}
	m, err := charter.NewMachine("greet", nil)
	if err != nil {
		panic(err)
	}
	for step, err := range m.Run(context.Background(), machine.UserText("hi")) {
		if err != nil {
			panic(err)
		}
		fmt.Println(step.Messages[0].Text())
	}
	fmt.Println("steps:", wrapped.steps.Load())
	// Output:
	// Hello!
	// steps: 1
}
