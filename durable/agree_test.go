package durable_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/command"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/testkit"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/message"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store"
)

// This file checks that the three event streams of a run agree: what
// machine.Machine.Events yields on an in-memory machine, what
// durable.Runner.RunEvents yields for the same charter and inputs, and
// what durable.Runner.Watch reads from the event log afterwards (of the
// RunEvents run, and of the same scenario run through Run, Sweep and
// Signal, and through Hold.Expire for an expiry).
//
// The equivalence checked (agreeing): every event compares equal as JSON
// (a durable.Event's machine.Event, as the log encodes it), in order, with
// two normalisations, both of what the log does or what cannot be
// ordered:
//   - a step event's Step.Root is dropped (the log is not a snapshot
//     store), and a tool call's Duration (a measure of time);
//   - within each run of consecutive leaf events (text and thinking deltas,
//     tool calls started and finished: the events of one round's leaves,
//     which run concurrently), events are grouped by instance, keeping
//     each instance's order, and the text and thinking deltas of each
//     content block are coalesced into one at the place of the first (the
//     log keeps one delta per block).
// Nothing else is normalised: IDs come from the charter's NewID and times
// from a test clock, the same in every leg. Checkpoint steps
// (machine.Replied) are not normalised away: no stream may show one.

// agreeState is the state of the scenarios' "desk" node.
type agreeState struct {
	Count int    `json:"count"`
	Note  string `json:"note,omitempty"`
}

// askArgs configures the ask tool's suspension.
type askArgs struct {
	Event  string `json:"event,omitempty"`
	Expire bool   `json:"expire,omitempty"`
}

// agreeCharter builds the scenarios' charter: a desk that works (a tool
// that updates state), asks (a suspension whose resume handler updates
// state), takes notes and decides by command, moves to a review node, and
// spawns helper workers that work and cede.
func agreeCharter(t *testing.T, clock *testkit.Clock) *machine.Charter {
	t.Helper()
	work := node.NewTool("work", "do a unit of work", func(ctx *node.ToolContext[agreeState], _ empty) (int, error) {
		err := ctx.Update(func(s *agreeState) { s.Count++ })
		return ctx.State().Count, err
	})
	ask := node.NewTool("ask", "ask for approval", func(ctx *node.ToolContext[agreeState], in askArgs) (string, error) {
		opts := []instance.SuspendOption{instance.WithTimeout(time.Hour)}
		if in.Event != "" {
			opts = append(opts, instance.WithEvent(in.Event))
		}
		if in.Expire {
			opts = append(opts, instance.OnTimeoutResume("timed out", false))
		}
		return "", ctx.Suspend("approval", opts...)
	}, node.OnResume(func(ctx *node.ToolContext[agreeState], _ askArgs, r node.Resumed[string]) (string, error) {
		note := r.Payload
		return note, ctx.Update(func(s *agreeState) { s.Note = note })
	}))
	type noteIn struct {
		Text string `json:"text"`
	}
	note := command.New("note", "take a note", func(ctx *command.Context[agreeState], in noteIn) (string, error) {
		return in.Text, ctx.Update(func(s *agreeState) { s.Note = in.Text })
	})
	type decideIn struct {
		SuspendID string `json:"suspend_id"`
		Decision  string `json:"decision"`
	}
	decide := command.New("decide", "decide a pending approval", func(ctx *command.Context[agreeState], in decideIn) (string, error) {
		return in.Decision, ctx.Resume(in.SuspendID, in.Decision)
	})
	spawn := node.NewTransition("spawn", "start two helpers", func(_ *node.TransitionContext[agreeState], _ empty) (instance.Effect, error) {
		return instance.Spawn(instance.Child{ID: "h1", Node: "helper"}, instance.Child{ID: "h2", Node: "helper"}), nil
	}, node.Targets("helper"))
	desk := mustAgreeNode(t, "desk", node.Config[agreeState]{
		Tools:       []node.Tool[agreeState]{work, ask},
		Transitions: []node.Transition[agreeState]{node.To[agreeState]("review", "hand over to review"), spawn},
		Commands:    []command.Command[agreeState]{note, decide},
	})
	review := mustAgreeNode(t, "review", node.Config[agreeState]{})
	helperWork := node.NewTool("work", "do a unit of work", func(ctx *node.ToolContext[agreeState], _ empty) (int, error) {
		err := ctx.Update(func(s *agreeState) { s.Count++ })
		return ctx.State().Count, err
	})
	helper := mustAgreeNode(t, "helper", node.Config[agreeState]{
		Worker: true, Tools: []node.Tool[agreeState]{helperWork},
		Transitions: []node.Transition[agreeState]{node.Ceder[agreeState]("")},
	})
	var n atomic.Int64
	c, err := machine.NewCharter(machine.CharterConfig{
		Model: agreeModel(), Nodes: []*node.Node{desk, review, helper}, Clock: clock.Now,
		NewID: func() string { return fmt.Sprintf("id%d", n.Add(1)) },
	})
	require.NoError(t, err)
	return c
}

func mustAgreeNode(t *testing.T, name string, cfg node.Config[agreeState]) *node.Node {
	t.Helper()
	n, err := node.New(name, cfg)
	require.NoError(t, err)
	return n
}

// agreeModel replies from the transcript alone: the desk follows the
// last user order ("work", "ask", "ask event", "ask expire", "review",
// "spawn"); a helper works once and cedes. It streams every reply in
// several chunks, and thinks before each reply.
func agreeModel() llm.Model {
	m := scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		order, results := "", 0
		for _, msg := range req.Messages {
			switch {
			case msg.Role == message.User && msg.Source.InstanceID == "":
				order, results = msg.Text(), 0
			case msg.Role == message.Tool:
				results++
			}
		}
		id := fmt.Sprintf("%s_%d", req.InstanceID, len(req.Messages))
		call := func(name string, in any) scripted.Reply {
			return scripted.Reply{Thinking: "let me see", Signature: "sig", Text: "On it: " + name + ".", Calls: []scripted.Call{{ID: id, Name: name, Input: in}}}
		}
		text := func(s string) scripted.Reply { return scripted.Reply{Thinking: "done now", Signature: "sig", Text: s} }
		switch req.Node {
		case "review":
			return text("reviewed at length"), nil
		case "helper":
			if results == 0 {
				return call("work", empty{}), nil
			}
			return call(node.CedeTool, map[string]string{"content": "helped " + req.InstanceID}), nil
		}
		switch {
		case results > 0 || order == "":
			return text("that is all for " + order), nil
		case order == "work" && results < 2:
			return call("work", empty{}), nil
		case order == "ask":
			return call("ask", askArgs{}), nil
		case order == "ask event":
			return call("ask", askArgs{Event: "ci.passed"}), nil
		case order == "ask expire":
			return call("ask", askArgs{Expire: true}), nil
		case order == "review":
			return call(node.TransitionPrefix+"review", map[string]any{}), nil
		case order == "spawn":
			return call("spawn", empty{}), nil
		}
		return text("no order"), nil
	})
	return m.Configure(scripted.Config{ChunkSize: 5})
}

// agreeAct is one act of a scenario: the inputs of a run (given the
// pending suspend IDs), or a sweep or a signal, after the clock moved on
// by advance.
type agreeAct struct {
	advance time.Duration
	// inputs are the run's inputs (none: a run with no input).
	inputs func(pending []string) []machine.Input
	// sweep: the durable leg that uses Run sweeps (Runner.Sweep), the
	// others run with no input.
	sweep bool
	// signal: the durable leg that uses Run signals (Runner.Signal), the
	// others run with a machine.SignalInput.
	signal *machine.SignalInput
}

func say(text string) agreeAct {
	return agreeAct{inputs: func([]string) []machine.Input { return []machine.Input{machine.UserText(text)} }}
}

func withPending(fn func(id string) machine.Input) agreeAct {
	return agreeAct{inputs: func(p []string) []machine.Input { return []machine.Input{fn(p[0])} }}
}

// agreeScenarios are the runs every stream must agree on; want are kinds
// machine.Events must yield in the scenario (so that the scenario shows
// what it is about).
var agreeScenarios = []struct {
	name string
	acts []agreeAct
	want []machine.EventKind
}{
	{"plain turn with tools", []agreeAct{say("work")},
		[]machine.EventKind{machine.EventTextDelta, machine.EventThinkingDelta, machine.EventToolStarted, machine.EventToolFinished, machine.EventStateChanged}},
	{"resume with a handler that updates state", []agreeAct{say("ask"), withPending(func(id string) machine.Input {
		return machine.ResumeInput{SuspendID: id, Payload: "approved"}
	})}, []machine.EventKind{machine.EventSuspended, machine.EventResumed, machine.EventStateChanged}},
	{"command that updates state", []agreeAct{{inputs: func([]string) []machine.Input {
		return []machine.Input{command.Invoke("note", map[string]string{"text": "remember"})}
	}}}, []machine.EventKind{machine.EventStateChanged}},
	{"command that resolves a suspension", []agreeAct{say("ask"), withPending(func(id string) machine.Input {
		return command.Invoke("decide", map[string]string{"suspend_id": id, "decision": "withdrawn"})
	})}, []machine.EventKind{machine.EventResumed, machine.EventStateChanged}},
	{"cancel", []agreeAct{say("ask"), withPending(func(id string) machine.Input {
		return machine.CancelInput{SuspendID: id, Reason: "changed my mind"}
	})}, []machine.EventKind{machine.EventCancelled}},
	{"expiry by the sweeper", []agreeAct{say("ask expire"), {advance: 2 * time.Hour, sweep: true}},
		[]machine.EventKind{machine.EventExpired, machine.EventStateChanged}},
	{"signal", []agreeAct{say("ask event"), {signal: &machine.SignalInput{Event: "ci.passed", Payload: "green"}}},
		[]machine.EventKind{machine.EventResumed, machine.EventStateChanged}},
	{"transition", []agreeAct{say("review")}, []machine.EventKind{machine.EventTransition}},
	{"workers", []agreeAct{say("spawn")}, []machine.EventKind{machine.EventSpawn, machine.EventCede}},
}

var agreeStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// TestEventStreamsAgree runs every scenario through machine.Events on an
// in-memory machine, through RunEvents, and through Run (with Sweep and
// Signal), on every store, and compares the three event sequences and
// the event logs of the two durable runs read with Watch (see the top of
// this file for the equivalence).
func TestEventStreamsAgree(t *testing.T) {
	for _, sc := range agreeScenarios {
		t.Run(sc.name, func(t *testing.T) {
			want := agreeInMemory(t, sc.acts)
			kinds := map[machine.EventKind]bool{}
			for _, e := range want {
				kinds[e.Kind] = true
			}
			for _, k := range sc.want {
				require.True(t, kinds[k], "machine.Events yields no %s", k)
			}
			norm := normalEvents(t, want)
			for name, open := range stores(t) {
				t.Run(name, func(t *testing.T) {
					// A store each: suspend IDs are unique across machines.
					streamed, rEvents := agreeRunEvents(t, open(t), sc.acts)
					requireAgree(t, norm, streamed, "RunEvents")
					requireAgree(t, norm, agreeWatch(t, rEvents, "a"), "Watch after RunEvents")
					rRun := agreeRun(t, open(t), sc.acts, sweepAll)
					requireAgree(t, norm, agreeWatch(t, rRun, "b"), "Watch after Run")
					if slices.ContainsFunc(sc.acts, func(a agreeAct) bool { return a.sweep }) {
						// A fleet's deadline job expires by Hold.Expire.
						rExpire := agreeRun(t, open(t), sc.acts, expireHeld)
						requireAgree(t, norm, agreeWatch(t, rExpire, "b"), "Watch after Hold.Expire")
					}
				})
			}
		})
	}
}

// agreeInMemory runs the acts through machine.Events on a fresh machine.
func agreeInMemory(t *testing.T, acts []agreeAct) []machine.Event {
	ctx := context.Background()
	clock := testkit.NewClock(agreeStart)
	m, err := agreeCharter(t, clock).NewMachine("desk", nil)
	require.NoError(t, err)
	var out []machine.Event
	for _, a := range acts {
		clock.Advance(a.advance)
		for e, err := range m.Events(ctx, actInputs(a, pendingIDs(m.Pending()))...) {
			require.NoError(t, err)
			out = append(out, e)
		}
	}
	return out
}

// actInputs are the inputs of act a for machine.Events and RunEvents.
func actInputs(a agreeAct, pending []string) []machine.Input {
	switch {
	case a.signal != nil:
		return []machine.Input{*a.signal}
	case a.inputs != nil:
		return a.inputs(pending)
	}
	return nil
}

func pendingIDs(calls []instance.SuspendedCall) []string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.SuspendID
	}
	return ids
}

// agreeRunner is a runner of a charter of its own (IDs, model, clock).
func agreeRunner(t *testing.T, s store.Store) (*durable.Runner, *testkit.Clock) {
	clock := testkit.NewClock(agreeStart)
	r, err := durable.New(durable.Config{Store: s, Charter: agreeCharter(t, clock)})
	require.NoError(t, err)
	return r, clock
}

// agreeRunEvents runs the acts through RunEvents on machine "a".
func agreeRunEvents(t *testing.T, s store.Store, acts []agreeAct) ([]machine.Event, *durable.Runner) {
	ctx := context.Background()
	r, clock := agreeRunner(t, s)
	_, err := r.Create(ctx, "a", "desk", nil)
	require.NoError(t, err)
	var out []machine.Event
	for _, a := range acts {
		clock.Advance(a.advance)
		for e, err := range r.RunEvents(ctx, "a", actInputs(a, durablePending(t, r, "a"))...) {
			require.NoError(t, err)
			out = append(out, e)
		}
	}
	return out, r
}

// sweepAll expires with the sweeper.
func sweepAll(t *testing.T, r *durable.Runner, _ time.Time) {
	n, err := r.Sweep(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// expireHeld expires machine "b" under its hold, as a fleet's deadline
// job does with its database's clock.
func expireHeld(t *testing.T, r *durable.Runner, now time.Time) {
	ctx := context.Background()
	h, err := r.Hold(ctx, "b")
	require.NoError(t, err)
	defer h.Release()
	_, err = drain(h.Expire(ctx, now))
	require.NoError(t, err)
}

// agreeRun runs the acts through Run, Signal and expire on machine "b".
func agreeRun(t *testing.T, s store.Store, acts []agreeAct, expire func(*testing.T, *durable.Runner, time.Time)) *durable.Runner {
	ctx := context.Background()
	r, clock := agreeRunner(t, s)
	_, err := r.Create(ctx, "b", "desk", nil)
	require.NoError(t, err)
	for _, a := range acts {
		clock.Advance(a.advance)
		switch {
		case a.sweep:
			expire(t, r, clock.Now())
		case a.signal != nil:
			n, err := r.Signal(ctx, a.signal.Event, a.signal.Payload)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		default:
			_, err := drain(r.Run(ctx, "b", actInputs(a, durablePending(t, r, "b"))...))
			require.NoError(t, err)
		}
	}
	return r
}

func durablePending(t *testing.T, r *durable.Runner, id string) []string {
	list, err := r.Pending(context.Background(), store.Filter{MachineID: id})
	require.NoError(t, err)
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids
}

// agreeWatch reads machine id's event log from its start with Watch.
func agreeWatch(t *testing.T, r *durable.Runner, id string) []machine.Event {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := r.LoadAt(ctx, id)
	require.NoError(t, err)
	var out []machine.Event
	if l.EventSeq == 0 {
		return out
	}
	for e, err := range r.Watch(ctx, id, 0) {
		require.NoError(t, err)
		if e.Live {
			continue // the run is over: a late live event the log has
		}
		require.False(t, e.Echo, "an echo of a live event this watcher did not get")
		out = append(out, e.Event)
		if e.Seq == l.EventSeq {
			break
		}
	}
	return out
}

// requireAgree checks that events normalise to want.
func requireAgree(t *testing.T, want []any, events []machine.Event, stream string) {
	t.Helper()
	got := normalEvents(t, events)
	if !slices.EqualFunc(want, got, func(a, b any) bool { return jsonText(t, a) == jsonText(t, b) }) {
		t.Fatalf("%s disagrees with machine.Events:\nwant:\n%s\ngot:\n%s", stream, eventLines(t, want), eventLines(t, got))
	}
}

func jsonText(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func eventLines(t *testing.T, events []any) string {
	var out string
	for i, e := range events {
		out += fmt.Sprintf("%3d %s\n", i, jsonText(t, e))
	}
	return out
}

// isLeafEvent reports the events of a leaf's step as it runs.
func isLeafEvent(k machine.EventKind) bool {
	switch k {
	case machine.EventTextDelta, machine.EventThinkingDelta, machine.EventToolStarted, machine.EventToolFinished:
		return true
	}
	return false
}

// normalEvents normalises events as the top of this file says, and
// returns each as its JSON value.
func normalEvents(t *testing.T, events []machine.Event) []any {
	var out []any
	for i := 0; i < len(events); {
		if !isLeafEvent(events[i].Kind) {
			out = append(out, jsonValue(t, events[i]))
			i++
			continue
		}
		j := i
		for j < len(events) && isLeafEvent(events[j].Kind) {
			j++
		}
		for _, e := range coalesce(events[i:j]) {
			out = append(out, jsonValue(t, e))
		}
		i = j
	}
	return out
}

// coalesce groups a run of leaf events by instance and joins the deltas
// of each content block.
func coalesce(run []machine.Event) []machine.Event {
	type key struct {
		kind     machine.EventKind
		instance string
		block    int
	}
	var out []machine.Event
	at := map[key]int{}
	for _, e := range run {
		if e.Kind == machine.EventTextDelta || e.Kind == machine.EventThinkingDelta {
			k := key{e.Kind, e.InstanceID, e.Block}
			if i, ok := at[k]; ok {
				out[i].Text += e.Text
				continue
			}
			at[k] = len(out)
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b machine.Event) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
	return out
}

// jsonValue is e as the log encodes it, without the step's tree and a
// tool call's duration.
func jsonValue(t *testing.T, e machine.Event) any {
	if e.Tool != nil {
		tc := *e.Tool
		tc.Duration = 0
		e.Tool = &tc
	}
	if e.Step != nil {
		st := *e.Step
		st.Root = nil
		e.Step = &st
	}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}
