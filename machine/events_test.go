package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
)

// render is one event on a line, without the durations of tool calls.
func render(e machine.Event) string {
	switch e.Kind {
	case machine.EventTextDelta, machine.EventThinkingDelta:
		return fmt.Sprintf("%s %s/%s [%d] %q", e.Kind, e.InstanceID, e.Node, e.Block, e.Text)
	case machine.EventToolStarted:
		return fmt.Sprintf("%s %s %s %s %s", e.Kind, e.InstanceID, e.Tool.ToolUseID, e.Tool.Name, e.Tool.Input)
	case machine.EventToolFinished:
		return fmt.Sprintf("%s %s %s %s %q error=%v suspend=%q", e.Kind, e.InstanceID, e.Tool.ToolUseID, e.Tool.Name,
			e.Tool.Result, e.Tool.IsError, e.Tool.SuspendID)
	case machine.EventSuspended:
		return fmt.Sprintf("%s %s %s by=%s call=%s/%s %q", e.Kind, e.InstanceID, e.Lifecycle.SuspendID, e.Lifecycle.Initiator,
			e.Call.Name, e.Call.ToolUseID, e.Call.Reason)
	case machine.EventResumed, machine.EventExpired, machine.EventCancelled:
		return fmt.Sprintf("%s %s %s cause=%s by=%s", e.Kind, e.InstanceID, e.Lifecycle.SuspendID, e.Lifecycle.Cause, e.Lifecycle.Initiator)
	case machine.EventStateChanged:
		state, _ := json.Marshal(e.State)
		return fmt.Sprintf("%s %s%s %s", e.Kind, e.InstanceID, e.Pack, state)
	case machine.EventTransition, machine.EventSpawn:
		return fmt.Sprintf("%s %s -> %s %d", e.Kind, e.InstanceID, e.Effect.Target, len(e.Effect.Children))
	case machine.EventCede:
		return fmt.Sprintf("%s %s -> %s %v", e.Kind, e.InstanceID, e.Cede.To, e.Cede.Content)
	case machine.EventStep:
		return fmt.Sprintf("%s %s done=%v", e.Kind, e.Step.Reason, e.Step.Done)
	}
	return string(e.Kind)
}

// events drains an event sequence, rendering each event.
func events(seq iter.Seq2[machine.Event, error]) ([]string, []machine.Event, error) {
	var lines []string
	var all []machine.Event
	for e, err := range seq {
		if err != nil {
			return lines, all, err
		}
		lines = append(lines, render(e))
		all = append(all, e)
	}
	return lines, all, nil
}

type weatherIn struct {
	City string `json:"city"`
}

type lookups struct {
	Lookups int `json:"lookups"`
}

// lookInParis is a reply that says it looks and calls the weather tool.
var lookInParis = scripted.Reply{Text: "Let me look.", Calls: []scripted.Call{{Name: "weather", Input: weatherIn{City: "Paris"}}}}

// weatherCharter is one assistant with a weather tool that counts its
// lookups, answered by model.
func weatherCharter(t *testing.T, model llm.Model, opts ...node.ToolOption) *machine.Charter {
	weather := node.NewTool("weather", "Current weather.", func(ctx *node.ToolContext[lookups], in weatherIn) (string, error) {
		return "sunny in " + in.City, ctx.Update(func(s *lookups) { s.Lookups++ })
	}, opts...)
	assistant := mustNode(t, "assistant", node.Config[lookups]{Tools: []node.Tool[lookups]{weather}})
	return charter(t, model, assistant)
}

// weatherRound asks a weather machine (weatherCharter) driven by model
// about Paris and returns the run's events, as lines and as they came.
func weatherRound(t *testing.T, model llm.Model) ([]string, []machine.Event) {
	t.Helper()
	m := newMachine(t, weatherCharter(t, model), "assistant")
	lines, all, err := events(m.Events(context.Background(), machine.UserText("Weather in Paris?")))
	require.NoError(t, err)
	return lines, all
}

// weatherLines are the event lines of a weatherRound whose model streams
// its first reply ("Let me look.") in the text deltas before and its
// final answer ("Sunny, 21°C.") in after.
func weatherLines(before, after []string) []string {
	delta := func(text string) string { return `text_delta id1/assistant [0] ` + strconv.Quote(text) }
	lines := make([]string, 0, len(before)+len(after)+5)
	for _, text := range before {
		lines = append(lines, delta(text))
	}
	lines = append(lines,
		`tool_started id1 toolu_1 weather {"city":"Paris"}`,
		`tool_finished id1 toolu_1 weather "sunny in Paris" error=false suspend=""`,
		`state_changed id1 {"lookups":1}`,
		`step tool_use done=false`,
	)
	for _, text := range after {
		lines = append(lines, delta(text))
	}
	return append(lines, `step end_turn done=true`)
}

func TestEventsToolRound(t *testing.T) {
	model := scripted.New(
		lookInParis,
		scripted.Text("Sunny, 21°C."),
	).Configure(scripted.Config{ChunkSize: 5})
	lines, all := weatherRound(t, model)
	require.Equal(t, weatherLines([]string{"Let m", "e loo", "k."}, []string{"Sunny", ", 21°", "C."}), lines)
	// The steps are Run's steps.
	replay := newMachine(t, weatherCharter(t, scripted.New(
		lookInParis,
		scripted.Text("Sunny, 21°C."),
	)), "assistant")
	steps := run(t, replay, machine.UserText("Weather in Paris?"))
	require.Equal(t, steps[0], *all[6].Step)
	require.Equal(t, steps[1], *all[10].Step)
	// Every event is plain data with a stable kind.
	for _, e := range all {
		data, err := json.Marshal(e)
		require.NoError(t, err)
		require.Contains(t, string(data), `"kind":"`+string(e.Kind)+`"`)
	}
}

func TestEventsParallelTools(t *testing.T) {
	var both sync.WaitGroup
	both.Add(2)
	lookup := node.NewTool("lookup", "Look up.", func(ctx *node.ToolContext[struct{}], in weatherIn) (string, error) {
		both.Done()
		both.Wait() // both calls run at once
		return "found " + in.City, nil
	}, node.Concurrent())
	n := mustNode(t, "assistant", node.Config[struct{}]{Tools: []node.Tool[struct{}]{lookup}})
	model := scripted.New(
		scripted.Tools(scripted.Call{Name: "lookup", Input: weatherIn{City: "Oslo"}}, scripted.Call{Name: "lookup", Input: weatherIn{City: "Rome"}}),
		scripted.Text("Done."),
	)
	m := newMachine(t, charter(t, model, n), "assistant")
	lines, _, err := events(m.Events(context.Background(), machine.UserText("Look up both.")))
	require.NoError(t, err)
	// Both start before either finishes; the order within each pair is
	// the scheduler's.
	require.ElementsMatch(t, []string{
		`tool_started id1 toolu_1 lookup {"city":"Oslo"}`,
		`tool_started id1 toolu_2 lookup {"city":"Rome"}`,
	}, lines[:2])
	require.ElementsMatch(t, []string{
		`tool_finished id1 toolu_1 lookup "found Oslo" error=false suspend=""`,
		`tool_finished id1 toolu_2 lookup "found Rome" error=false suspend=""`,
	}, lines[2:4])
	require.Equal(t, []string{
		`step tool_use done=false`,
		`text_delta id1/assistant [0] "Done."`,
		`step end_turn done=true`,
	}, lines[4:])
}

// approvalCharter is an assistant whose refund tool waits for approval.
func approvalCharter(t *testing.T, model llm.Model, clk *testkit.Clock, opts ...instance.SuspendOption) *machine.Charter {
	refund := node.NewTool("refund", "Refund an order.", func(ctx *node.ToolContext[struct{}], in struct {
		Order int `json:"order"`
	}) (string, error) {
		return "", ctx.Suspend("needs approval", opts...)
	}, node.OnResume(func(ctx *node.ToolContext[struct{}], in struct {
		Order int `json:"order"`
	}, r node.Resumed[json.RawMessage]) (string, error) {
		return "refunded: " + string(r.Payload), nil
	}))
	n := mustNode(t, "assistant", node.Config[struct{}]{Tools: []node.Tool[struct{}]{refund}})
	return charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Clock: clk.Now})
}

func TestEventsSuspendAndResume(t *testing.T) {
	model := scripted.New(
		scripted.Tool("refund", map[string]int{"order": 42}),
		scripted.Text("Refunded."),
	)
	m := newMachine(t, approvalCharter(t, model, newClock()), "assistant")
	lines, all, err := events(m.Events(context.Background(), machine.UserText("Refund order 42.")))
	require.NoError(t, err)
	require.Equal(t, []string{
		`tool_started id1 toolu_1 refund {"order":42}`,
		`tool_finished id1 toolu_1 refund "" error=false suspend="id2"`,
		`suspended id1 id2 by=tool call=refund/toolu_1 "needs approval"`,
		`step suspend done=true`,
	}, lines)
	require.Equal(t, m.Pending()[0], *all[2].Call)

	lines, _, err = events(m.Events(context.Background(), machine.ResumeInput{SuspendID: "id2", Payload: "ok"}))
	require.NoError(t, err)
	require.Equal(t, []string{
		`resumed id1 id2 cause=explicit by=tool`,
		`text_delta id1/assistant [0] "Refunded"`,
		`text_delta id1/assistant [0] "."`,
		`step end_turn done=true`,
	}, lines)
}

func TestEventsCancelAndExpire(t *testing.T) {
	clk := newClock()
	model := scripted.New(
		scripted.Tool("refund", map[string]int{"order": 1}),
		scripted.Text("Cancelled."),
		scripted.Tool("refund", map[string]int{"order": 2}),
		scripted.Text("Expired."),
	).Configure(scripted.Config{ChunkSize: 100})
	m := newMachine(t, approvalCharter(t, model, clk, instance.WithTimeout(time.Hour)), "assistant")
	// Each request suspends; then the suspension ends, by a cancel or by
	// the clock passing its deadline, and the model answers.
	for _, tc := range []struct {
		request string
		wait    time.Duration
		end     []machine.Input
		want    string
		answer  string
	}{
		{"Refund order 1.", 0, []machine.Input{machine.CancelInput{SuspendID: "id2", Reason: "changed my mind"}}, `cancelled id1 id2 cause=cancel by=tool`, "Cancelled."},
		{"Refund order 2.", 2 * time.Hour, nil, `expired id1 id3 cause=timeout by=tool`, "Expired."},
	} {
		_, _, err := events(m.Events(context.Background(), machine.UserText(tc.request)))
		require.NoError(t, err)
		clk.Advance(tc.wait)
		lines, _, err := events(m.Events(context.Background(), tc.end...))
		require.NoError(t, err)
		require.Equal(t, []string{tc.want, `text_delta id1/assistant [0] ` + strconv.Quote(tc.answer), `step end_turn done=true`}, lines)
	}
}

// generateOnly hides the scripted model's Stream.
type generateOnly struct{ llm.Model }

func TestEventsFallbackOneDeltaPerBlock(t *testing.T) {
	model := generateOnly{scripted.New(
		lookInParis,
		scripted.Text("Sunny, 21°C."),
	)}
	lines, _ := weatherRound(t, model)
	require.Equal(t, weatherLines([]string{"Let me look."}, []string{"Sunny, 21°C."}), lines)
}

func TestEventsModelErrorMidStream(t *testing.T) {
	boom := errors.New("provider overloaded")
	model := scripted.New(scripted.Reply{Text: "A partial answer", Err: boom}).Configure(scripted.Config{ChunkSize: 10})
	m := newMachine(t, weatherCharter(t, model), "assistant")
	_, err := m.Apply(context.Background(), machine.UserText("Hello?"))
	require.NoError(t, err)
	before := marshal(t, m)
	lines, _, err := events(m.Events(context.Background()))
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{
		`text_delta id1/assistant [0] "A partial "`,
		`text_delta id1/assistant [0] "answer"`,
	}, lines)
	require.Equal(t, before, marshal(t, m))
}

func TestEventsCancelMidStream(t *testing.T) {
	model := scripted.New(scripted.Text("A long answer that streams.")).Configure(scripted.Config{ChunkSize: 3})
	m := newMachine(t, weatherCharter(t, model), "assistant")
	_, err := m.Apply(context.Background(), machine.UserText("Tell me."))
	require.NoError(t, err)
	before := marshal(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deltas int
	var got error
	for e, err := range m.Events(ctx) {
		if err != nil {
			got = err
			break
		}
		require.Equal(t, machine.EventTextDelta, e.Kind)
		deltas++
		cancel()
	}
	require.ErrorIs(t, got, context.Canceled)
	require.Positive(t, deltas)
	require.Equal(t, before, marshal(t, m))
}

func TestEventsBreakEarly(t *testing.T) {
	model := scripted.New(
		lookInParis, // the abandoned round's
		lookInParis,
		scripted.Text("Sunny."),
	).Configure(scripted.Config{ChunkSize: 2})
	m := newMachine(t, weatherCharter(t, model), "assistant")
	_, err := m.Apply(context.Background(), machine.UserText("Weather in Paris?"))
	require.NoError(t, err)
	before := marshal(t, m)
	for range m.Events(context.Background()) {
		break // within the round: the round is abandoned
	}
	require.Equal(t, before, marshal(t, m))

	// At a step boundary: the machine is at that step; Run continues.
	for e, err := range m.Events(context.Background()) {
		require.NoError(t, err)
		if e.Kind == machine.EventStep {
			require.Equal(t, machine.ToolUse, e.Step.Reason)
			break
		}
	}
	steps := run(t, m)
	require.Equal(t, []machine.YieldReason{machine.EndTurn}, reasons(steps))
	require.Equal(t, "Sunny.", steps[0].Messages[0].Text())
}

func TestEventsSingleUse(t *testing.T) {
	m := newMachine(t, weatherCharter(t, scripted.New(scripted.Text("Hi."))), "assistant")
	seq := m.Events(context.Background(), machine.UserText("Hello"))
	_, _, err := events(seq)
	require.NoError(t, err)
	_, _, err = events(seq)
	require.ErrorIs(t, err, machine.ErrIterReused)
}

func TestEventsSpawnCedeTransition(t *testing.T) {
	parent := mustNode(t, "parent", node.Config[empty]{Transitions: []node.Transition[empty]{spawner[empty](), node.To[empty]("done", "finish")}})
	child := mustNode(t, "child", node.Config[empty]{Transitions: []node.Transition[empty]{node.Ceder[empty]("hand back")}})
	done := mustNode(t, "done", node.Config[empty]{})
	model := scripted.ByNode(map[string][]scripted.Reply{
		"parent": {scripted.Tool("spawn", spawnArgs{Nodes: []string{"child"}}), scripted.Tool(node.TransitionPrefix+"done", struct{}{})},
		"child":  {scripted.Tool("cede", map[string]string{"content": "42"})},
		"done":   {scripted.Text("42.")},
	})
	m := newMachine(t, charter(t, model, parent, child, done), "parent")
	lines, _, err := events(m.Events(context.Background(), machine.UserText("compute")))
	require.NoError(t, err)
	require.Equal(t, []string{
		`tool_started id1 toolu_1 spawn {"nodes":["child"]}`,
		`tool_finished id1 toolu_1 spawn "spawned child id2" error=false suspend=""`,
		`spawn id1 ->  1`,
		`step tool_use done=false`,
		`tool_started id2 toolu_2 cede {"content":"42"}`,
		`tool_finished id2 toolu_2 cede "ceded to id1" error=false suspend=""`,
		`cede id2 -> id1 42`,
		`step cede done=false`,
		`tool_started id1 toolu_3 transition_to_done {}`,
		`tool_finished id1 toolu_3 transition_to_done "transitioned to done" error=false suspend=""`,
		`transition id1 -> done 0`,
		`step tool_use done=false`,
		`text_delta id1/done [0] "42."`,
		`step end_turn done=true`,
	}, lines)
}

func TestEventsCommands(t *testing.T) {
	desk, helper := commandNodes(t)
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) { return scripted.Text("ready"), nil })
	m := newMachine(t, charter(t, model, desk, helper), "desk")
	lines, _, err := events(m.Events(context.Background(), command.Invoke("set", setIn{5}), command.Invoke("fork", nil)))
	require.NoError(t, err)
	// What every input applied comes before the first step.
	require.Equal(t, []string{
		`state_changed id1 {"count":5}`,
		`spawn id1 ->  2`,
		`step command done=false`,
		`step command done=false`,
		`text_delta id2/helper [0] "ready"`,
		`text_delta id3/helper [0] "ready"`,
		`step end_turn done=true`,
	}, slices.Concat(lines[:4], sortedDeltas(lines[4:6]), lines[6:]))
}

// sortedDeltas sorts the deltas of leaves that streamed in parallel.
func sortedDeltas(lines []string) []string {
	out := slices.Clone(lines)
	slices.Sort(out)
	return out
}

// TestApplyEventsThenEvents checks that ApplyEvents followed by Events
// with no inputs yields what Events with the inputs yields, and that
// ExpireEvents does the same for an expiry: the command step of an expired
// command suspension included.
func TestApplyEventsThenEvents(t *testing.T) {
	desk, helper := commandNodes(t)
	wait := command.New("wait", "wait for a while", func(ctx *command.Context[counter], _ empty) (string, error) {
		if err := ctx.Update(func(c *counter) { c.Count = 7 }); err != nil {
			return "", err
		}
		return "", ctx.Suspend("waiting", instance.WithTimeout(time.Hour))
	})
	waiter := mustNode(t, "waiter", node.Config[counter]{Commands: []command.Command[counter]{wait}})
	model := scripted.Func(func(req *llm.Request) (scripted.Reply, error) { return scripted.Text("ready"), nil })
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		root   string
		before []machine.Input
		inputs []machine.Input
		wait   time.Duration
	}{
		{name: "commands", root: "desk", inputs: []machine.Input{command.Invoke("set", setIn{5}), command.Invoke("fork", nil)}},
		{name: "expired command", root: "waiter", before: []machine.Input{command.Invoke("wait", nil)}, wait: 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clocks := [2]*testkit.Clock{newClock(), newClock()}
			var ms [2]*machine.Machine
			for i := range ms {
				ms[i] = newMachine(t, charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{desk, helper, waiter}, Clock: clocks[i].Now}), tc.root)
				_, _, err := events(ms[i].Events(ctx, tc.before...))
				require.NoError(t, err)
				clocks[i].Advance(tc.wait)
			}
			want, _, err := events(ms[0].Events(ctx, tc.inputs...))
			require.NoError(t, err)
			var applied []machine.Event
			if tc.inputs != nil {
				applied, err = ms[1].ApplyEvents(ctx, tc.inputs...)
			} else {
				applied, err = ms[1].ExpireEvents(clocks[1].Now())
			}
			require.NoError(t, err)
			got := testkit.Map(applied, render)
			rest, _, err := events(ms[1].Events(ctx))
			require.NoError(t, err)
			got = append(got, rest...)
			// Leaves stream in parallel: their deltas in any order.
			require.Equal(t, sortedDeltas(want), sortedDeltas(got))
			isDelta := func(l string) bool { return strings.HasPrefix(l, "text_delta") }
			require.Equal(t, slices.DeleteFunc(want, isDelta), slices.DeleteFunc(got, isDelta))
			require.True(t, slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "step command") }))
		})
	}
}
