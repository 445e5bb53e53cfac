package durable_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

// condModel scripts the conditions tests: a user message "wait <tool>"
// makes it call that tool once; "work" makes it call work once; after a
// tool result it answers "done: <result>". Every request is recorded. A
// gate, when set, blocks each call until it receives; entered reports
// each call as it starts.
type condModel struct {
	mu       sync.Mutex
	requests []*llm.Request
	entered  chan struct{}
	gate     chan struct{}
	calls    atomic.Int64
}

func (m *condModel) model() llm.Model {
	return scripted.Func(func(req *llm.Request) (scripted.Reply, error) {
		m.mu.Lock()
		m.requests = append(m.requests, req)
		m.mu.Unlock()
		m.calls.Add(1)
		if m.entered != nil {
			m.entered <- struct{}{}
		}
		if m.gate != nil {
			<-m.gate
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == message.Tool {
			return scripted.Reply{Text: "done: " + last.Parts[len(last.Parts)-1].Text}, nil
		}
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if t := req.Messages[i].Text(); strings.HasPrefix(t, "call ") {
				return scripted.Reply{Calls: []scripted.Call{{ID: "u" + string(rune('0'+len(req.Messages))), Name: strings.TrimPrefix(t, "call "), Input: empty{}}}}, nil
			}
		}
		return scripted.Reply{Text: "ok"}, nil
	})
}

func (m *condModel) last() *llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[len(m.requests)-1]
}

var workRuns atomic.Int64

// condCharter has tools that suspend with each resume condition.
func condCharter(t testing.TB, model llm.Model, clock *testkit.Clock) *machine.Charter {
	t.Helper()
	c, err := buildCondCharter(model, clock.Now)
	require.NoError(t, err)
	return c
}

func buildCondCharter(model llm.Model, now func() time.Time) (*machine.Charter, error) {
	suspendTool := func(name string, opts ...instance.SuspendOption) node.Tool[desk] {
		return node.NewTool(name, name, func(ctx *node.ToolContext[desk], _ empty) (string, error) {
			return "", ctx.Suspend("waiting for "+name, opts...)
		})
	}
	work := node.NewTool("work", "work", func(ctx *node.ToolContext[desk], _ empty) (string, error) {
		workRuns.Add(1)
		return "worked", nil
	})
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{
		suspendTool("ci", instance.WithEvent("ci.passed")),
		suspendTool("deploy", instance.WithEvent("deploy.done"), instance.WithTimeout(time.Hour)),
		suspendTool("summary", instance.WithTimeout(time.Hour), instance.OnTimeoutSummary()),
		suspendTool("fail", instance.WithTimeout(time.Hour), instance.OnTimeoutFail()),
		suspendTool("input", instance.WithTimeout(time.Hour), instance.OnTimeoutResume("default", false)),
		work,
	}})
	if err != nil {
		return nil, err
	}
	return machine.NewCharter(machine.CharterConfig{Model: model, Nodes: []*node.Node{n}, Clock: now})
}

type condEnv struct {
	r     *durable.Runner
	s     store.Store
	model *condModel
	clock *testkit.Clock
}

func newCondEnv(t *testing.T, s store.Store) *condEnv {
	e := &condEnv{s: s, model: &condModel{}, clock: testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	r, err := durable.New(durable.Config{Store: s, Charter: condCharter(t, e.model.model(), e.clock)})
	require.NoError(t, err)
	e.r = r
	return e
}

// start creates machine id and runs it with text to its end.
func (e *condEnv) start(t *testing.T, id, text string) []machine.Step {
	t.Helper()
	ctx := context.Background()
	_, err := e.r.Create(ctx, id, "desk", nil)
	require.NoError(t, err)
	steps, err := drain(e.r.Run(ctx, id, machine.UserText(text)))
	require.NoError(t, err)
	return steps
}

// lastText is the text of the last assistant message of machine id.
func (e *condEnv) lastText(t *testing.T, id string) string {
	t.Helper()
	m, _, err := e.r.Load(context.Background(), id)
	require.NoError(t, err)
	h := m.History()
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == message.Assistant && h[i].Text() != "" {
			return h[i].Text()
		}
	}
	return ""
}

func TestSignalWakesEachWaitingSuspensionOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		e := newCondEnv(t, s)
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c"} {
			e.start(t, id, "call ci")
		}
		e.start(t, "other", "call deploy")
		waiting, err := e.r.Pending(ctx, store.Filter{Event: "ci.passed"})
		require.NoError(t, err)
		require.Len(t, waiting, 3)
		require.Equal(t, "ci.passed", waiting[0].Event)

		woken, err := e.r.Signal(ctx, "ci.passed", "green")
		require.NoError(t, err)
		require.Equal(t, 3, woken)
		for _, id := range []string{"a", "b", "c"} {
			require.Equal(t, "done: green", e.lastText(t, id))
			m, _, err := e.r.Load(ctx, id)
			require.NoError(t, err)
			require.Empty(t, m.Pending())
		}
		woken, err = e.r.Signal(ctx, "ci.passed", "again")
		require.NoError(t, err)
		require.Zero(t, woken, "a second signal finds nothing waiting")
		other, err := e.r.Pending(ctx, store.Filter{MachineID: "other"})
		require.NoError(t, err)
		require.Len(t, other, 1, "a suspension waiting for another event stays")
	})
}

func TestSignalEventCause(t *testing.T) {
	e := newCondEnv(t, stores(t)["memstore"](t))
	ctx := context.Background()
	e.start(t, "m", "call deploy")
	var events []instance.Event
	_, err := e.r.Create(ctx, "idle", "desk", nil)
	require.NoError(t, err)
	pending, err := e.r.Pending(ctx, store.Filter{MachineID: "m"})
	require.NoError(t, err)
	steps, err := drain(e.r.Run(ctx, "m", machine.SignalInput{Event: "deploy.done", Payload: map[string]int{"build": 7}}))
	require.NoError(t, err)
	for _, s := range steps {
		events = append(events, s.Events...)
	}
	require.Equal(t, 1, durable.Woken(events, "deploy.done"))
	require.Equal(t, pending[0].ID, events[0].SuspendID)
	require.Equal(t, instance.CauseEvent, events[0].Cause)
	require.True(t, events[0].HadPayload)
	require.Equal(t, `done: {"build":7}`, e.lastText(t, "m"))
}

func TestSignalRejectsBadInput(t *testing.T) {
	e := newCondEnv(t, stores(t)["memstore"](t))
	ctx := context.Background()
	e.start(t, "m", "call ci")
	for _, ev := range []string{"", "bad\nname", strings.Repeat("x", instance.MaxEventLen+1), "\xff"} {
		n, err := e.r.Signal(ctx, ev, nil)
		require.ErrorIs(t, err, instance.ErrInvalidEvent, "%q", ev)
		require.Zero(t, n)
	}
	_, err := e.r.Signal(ctx, "ci.passed", make(chan int))
	require.ErrorIs(t, err, instance.ErrPayloadDecode)
	pending, err := e.r.Pending(ctx, store.Filter{MachineID: "m"})
	require.NoError(t, err)
	require.Len(t, pending, 1, "a refused signal changes nothing")
}

func TestTimeoutActions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		e := newCondEnv(t, s)
		ctx := context.Background()
		for _, tool := range []string{"summary", "fail", "input", "deploy"} {
			e.start(t, tool, "call "+tool)
		}
		e.clock.Advance(2 * time.Hour)
		n, err := e.r.Sweep(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		summary := e.lastText(t, "summary")
		require.Contains(t, summary, "done: The wait timed out with no result at 2026-01-02T04:04:05Z, 1h0m0s after it began.")
		require.Contains(t, summary, "the tool call summary, waiting for: waiting for summary")
		require.Contains(t, e.lastText(t, "fail"), "expired at 2026-01-02T04:04:05Z without a result")
		require.Equal(t, "done: default", e.lastText(t, "input"))
		require.Contains(t, e.lastText(t, "deploy"), "expired", "an event wait times out too")
		for _, id := range []string{"summary", "fail", "input"} {
			entries, err := e.r.Pending(ctx, store.Filter{MachineID: id, Status: store.StatusExpired})
			require.NoError(t, err)
			require.Len(t, entries, 1, id)
		}
	})
}

func TestFreshTurnResume(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		e := newCondEnv(t, s)
		ctx := context.Background()
		e.start(t, "m", "call ci")
		before := len(e.model.last().Messages)
		pending, err := e.r.Pending(ctx, store.Filter{MachineID: "m"})
		require.NoError(t, err)
		steps, err := runSteps(e.r.Resume(ctx, machine.ResumeInput{SuspendID: pending[0].ID, Payload: "green", FreshTurn: true}))
		require.NoError(t, err)
		var resumed instance.Event
		for _, s := range steps {
			for _, ev := range s.Events {
				if ev.Type == instance.EventResumed {
					resumed = ev
				}
			}
		}
		require.True(t, resumed.FreshTurn)
		req := e.model.last()
		require.Equal(t, "done: green", e.lastText(t, "m"))
		// The transcript is the digest, the released reply and its
		// result: not the whole earlier transcript.
		require.Len(t, req.Messages, 3)
		require.Equal(t, message.User, req.Messages[0].Role)
		digest := req.Messages[0].Text()
		require.Contains(t, digest, "Digest of the conversation so far (1 earlier messages are not shown)")
		require.Contains(t, digest, "The request: call ci")
		require.Contains(t, digest, "waiting for: waiting for ci")
		require.Equal(t, message.Assistant, req.Messages[1].Role)
		require.Equal(t, 1, before)

		// Later turns go on from the fresh turn.
		_, err = drain(e.r.Run(ctx, "m", machine.UserText("more")))
		require.NoError(t, err)
		require.Len(t, e.model.last().Messages, 5)
		require.Equal(t, digest, e.model.last().Messages[0].Text())
	})
}

func TestFreshTurnDigestHook(t *testing.T) {
	model := &condModel{}
	var got machine.DigestInput
	n, err := node.New("desk", node.Config[desk]{Tools: []node.Tool[desk]{node.NewTool("ci", "ci", func(ctx *node.ToolContext[desk], _ empty) (string, error) {
		return "", ctx.Suspend("ci", instance.WithEvent("ci.passed"))
	})}})
	require.NoError(t, err)
	c, err := machine.NewCharter(machine.CharterConfig{Model: model.model(), Nodes: []*node.Node{n},
		Digest: func(_ context.Context, in machine.DigestInput) (string, error) {
			got = in
			return "summary by hook", nil
		}})
	require.NoError(t, err)
	r, err := durable.New(durable.Config{Store: stores(t)["memstore"](t), Charter: c})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = r.Create(ctx, "m", "desk", nil)
	require.NoError(t, err)
	_, err = drain(r.Run(ctx, "m", machine.UserText("call ci")))
	require.NoError(t, err)
	woken, err := r.Signal(ctx, "ci.passed", "ok")
	require.NoError(t, err)
	require.Equal(t, 1, woken)
	require.Len(t, model.last().Messages, 3, "a plain signal continues the transcript")

	_, err = drain(r.Run(ctx, "m", machine.UserText("call ci")))
	require.NoError(t, err)
	pending, err := r.Pending(ctx, store.Filter{MachineID: "m"})
	require.NoError(t, err)
	_, err = drain(r.Run(ctx, "m", machine.SignalInput{Event: "ci.passed", Payload: "ok", FreshTurn: true}))
	require.NoError(t, err)
	require.Equal(t, pending[0].ID, got.Call.SuspendID)
	require.Len(t, got.Transcript, 5)
	require.Equal(t, "summary by hook", model.last().Messages[0].Text())
}
