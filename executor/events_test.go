package executor_test

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/executor"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/message"
)

// calls counts how the executor asks a scripted model for its reply.
type calls struct {
	*scripted.Model
	generated, streamed atomic.Int32
}

func (c *calls) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	c.generated.Add(1)
	return c.Model.Generate(ctx, req)
}

func (c *calls) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	c.streamed.Add(1)
	return c.Model.Stream(ctx, req)
}

func TestStepEvents(t *testing.T) {
	reply := scripted.Reply{Text: "Adding.", Calls: []scripted.Call{
		{Name: "add", Input: addIn{By: 2}}, {Name: "missing", Input: addIn{}}, {Name: "ask", Input: askIn{Question: "ok?"}},
	}}
	model := &calls{Model: scripted.New(reply, reply).Configure(scripted.Config{ChunkSize: 4})}
	e := newExecutor(t, model)

	// Nobody listens: Generate, as before.
	quiet := step(t, e, tree(1))
	require.Equal(t, [2]int32{1, 0}, [2]int32{model.generated.Load(), model.streamed.Load()})

	var mu sync.Mutex
	var got []string
	req := &executor.StepRequest{Root: tree(1), Transcript: []message.Message{message.UserText("go")}, Events: func(ev executor.Event) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("%s %s/%s", ev.Kind, ev.InstanceID, ev.Node)
		if ev.Tool != nil {
			line += fmt.Sprintf(" %s %s %s %q error=%v suspend=%s", ev.Tool.ToolUseID, ev.Tool.Name, ev.Tool.Input, ev.Tool.Result, ev.Tool.IsError, ev.Tool.SuspendID)
		} else {
			line += fmt.Sprintf(" [%d] %q", ev.Block, ev.Text)
		}
		got = append(got, line)
	}}
	req.Instance = req.Root
	loud, err := e.Step(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, [2]int32{1, 1}, [2]int32{model.generated.Load(), model.streamed.Load()})
	require.Equal(t, []string{
		`text_delta root/desk [0] "Addi"`,
		`text_delta root/desk [0] "ng."`,
		`tool_started root/desk toolu_4 add {"by":2} "" error=false suspend=`,
		`tool_finished root/desk toolu_4 add {"by":2} "added 2" error=false suspend=`,
		`tool_started root/desk toolu_5 missing {"by":0} "" error=false suspend=`,
		`tool_finished root/desk toolu_5 missing {"by":0} "unknown tool \"missing\"" error=true suspend=`,
		`tool_started root/desk toolu_6 ask {"question":"ok?"} "" error=false suspend=`,
		`tool_finished root/desk toolu_6 ask {"question":"ok?"} "" error=false suspend=ask-ok?`,
	}, got)
	// Listening changes nothing in the result but the tool-use IDs the
	// scripted model numbers on.
	require.Equal(t, quiet.State, loud.State)
	require.Equal(t, quiet.Reply.Message.Text(), loud.Reply.Message.Text())
	require.Equal(t, len(quiet.Suspended), len(loud.Suspended))
}
