package main

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
)

const wantOutput = `user: Should our 40-hectare farm invest in solar panels or a wind turbine?

round 1
  [step: tool_use, done: false]
  assistant calls dispatch {"topics":["solar","wind"]}
  tool result: spawned researcher r2, researcher r3
  tree: lead[r1] { researcher(solar)[r2], researcher(wind)[r3] }

round 2
  [step: tool_use, done: false]
  assistant (researcher r2) calls search {"angle":"cost and payback for a farm"}
  tool result (researcher r2): solar: a 30 kW array costs about $45k, pays back in 7-9 years and needs little upkeep
  assistant (researcher r3) calls search {"angle":"cost and payback for a farm"}
  tool result (researcher r3): wind: a 20 kW turbine costs about $80k, pays back in 10-15 years on a good site and needs yearly maintenance
  tree: lead[r1] { researcher(solar)[r2], researcher(wind)[r3] }

round 3
  [step: cede, done: false]
  assistant (researcher r2) calls cede {"content":"solar: a 30 kW array costs about $45k, pays back in 7-9 years and needs little upkeep"}
  tool result (researcher r2): ceded to r1
  user (researcher r2): solar: a 30 kW array costs about $45k, pays back in 7-9 years and needs little upkeep
  assistant (researcher r3) calls cede {"content":"wind: a 20 kW turbine costs about $80k, pays back in 10-15 years on a good site and needs yearly maintenance"}
  tool result (researcher r3): ceded to r1
  user (researcher r3): wind: a 20 kW turbine costs about $80k, pays back in 10-15 years on a good site and needs yearly maintenance
  tree: lead[r1]

round 4
  [step: end_turn, done: true]
  assistant: Findings:
  - solar: a 30 kW array costs about $45k, pays back in 7-9 years and needs little upkeep
  - wind: a 20 kW turbine costs about $80k, pays back in 10-15 years on a good site and needs yearly maintenance
  Recommendation: start with solar; it is cheaper and pays back sooner.
  tree: lead[r1]
`

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	if diff := cmp.Diff(wantOutput, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// rendezvous wraps a model so that researcher calls wait (up to a timeout)
// for a second researcher call to be in flight. It records the most calls
// seen in flight at once: 2 proves the workers' model calls overlap.
type rendezvous struct {
	next     llm.Model
	mu       sync.Mutex
	inflight int
	max      int
	release  chan struct{}
}

func (r *rendezvous) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if req.Node != researcherNode {
		return r.next.Generate(ctx, req)
	}
	r.mu.Lock()
	r.inflight++
	r.max = max(r.max, r.inflight)
	if r.release == nil {
		r.release = make(chan struct{})
	}
	ch := r.release
	if r.inflight == 2 {
		close(ch)
		r.release = nil
	}
	r.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
	}
	defer func() {
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
	}()
	return r.next.Generate(ctx, req)
}

func TestWorkersRunConcurrently(t *testing.T) {
	script := scriptedModel()
	model := &rendezvous{next: script}
	require.NoError(t, demo(context.Background(), io.Discard, model))
	require.Equal(t, 2, model.max, "the two researchers' model calls never overlapped")

	reqs := script.Requests()
	nodes := make([]string, len(reqs))
	for i, r := range reqs {
		nodes[i] = r.Node
	}
	// The lead is not called while its children work.
	require.Equal(t, []string{"lead", "researcher", "researcher", "researcher", "researcher", "lead"}, nodes)

	// Each researcher sees the shared question and its own tool exchange,
	// never the other's.
	for _, r := range reqs[3:5] {
		require.Len(t, r.Messages, 3)
		require.Equal(t, question, r.Messages[0].Text())
		require.Equal(t, r.InstanceID, r.Messages[1].Source.InstanceID)
		require.Equal(t, r.InstanceID, r.Messages[2].Source.To)
	}

	// Both cedes reach the lead, in leaf order.
	var cedes []string
	for _, m := range reqs[5].Messages {
		if m.Role == message.User && m.Source.Node == researcherNode {
			cedes = append(cedes, m.Source.InstanceID)
		}
	}
	require.Equal(t, []string{"r2", "r3"}, cedes)
}

func TestDispatchRejectsEmptyTopics(t *testing.T) {
	for _, topics := range [][]string{{}, {"solar", ""}} {
		c, err := newCharter(scripted.New(
			scripted.Tool("dispatch", DispatchArgs{Topics: topics}),
			scripted.Text("I need at least one topic."),
		), sequence())
		require.NoError(t, err)
		m, err := c.NewMachine(leadNode, nil)
		require.NoError(t, err)
		for _, err := range m.Run(context.Background(), machine.UserText(question)) {
			require.NoError(t, err)
		}
		h := m.History()
		require.Len(t, h, 4)
		result := h[2].Parts[0]
		require.True(t, result.IsError)
		require.Contains(t, result.Text, "topic")
		require.Empty(t, m.Root().Children)
	}
}
