package machine_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/markov-agents/markov/internal/oteltest"
	"github.com/markov-agents/markov/llm"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/serialize"
)

func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	id := suspendAndResume(t, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))

	count := map[string]int{}
	attrs := map[string]map[string]string{}
	for _, s := range rec.Ended() {
		count[s.Name()]++
		attrs[s.Name()] = oteltest.SpanAttributes(s)
	}
	require.Equal(t, map[string]int{
		"markov.run": 2, "markov.step": 2, "chat": 2, "execute_tool ask": 1, "markov.suspend": 1, "markov.resume": 1,
	}, count)
	tool := attrs["execute_tool ask"]
	require.Equal(t, "suspended", tool["markov.outcome"])
	require.Equal(t, "execute_tool", tool["gen_ai.operation.name"])
	require.Equal(t, "ask", tool["gen_ai.tool.name"])
	require.NotEmpty(t, tool["gen_ai.tool.call.id"])
	require.Equal(t, id, attrs["markov.suspend"]["markov.suspend_id"])
	require.Equal(t, "explicit", attrs["markov.resume"]["markov.cause"])
	chat := attrs["chat"]
	require.Equal(t, "end_turn", chat["markov.stop"])
	require.Equal(t, "chat", chat["gen_ai.operation.name"])
	require.Equal(t, "scripted", chat["gen_ai.provider.name"])
	require.Equal(t, `["end_turn"]`, chat["gen_ai.response.finish_reasons"])
	require.Equal(t, "2", chat["gen_ai.usage.output_tokens"])
}

// TestChatSpanNamesTheModel checks the GenAI name and request attributes
// of a model call whose settings name a model.
func TestChatSpanNamesTheModel(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := charterCfg(t, machine.CharterConfig{
		Model: scripted.New(scripted.Text("hi")), Nodes: []*node.Node{doneNode(t)}, TracerProvider: tp,
		Settings: llm.Settings{Model: "claude-test", MaxTokens: 100, Temperature: llm.Temperature(0.5)},
	})
	run(t, newMachine(t, c, "done"), machine.UserText("hello"))
	spans := oteltest.SpansNamed(rec.Ended(), "chat claude-test")
	require.Len(t, spans, 1)
	require.Equal(t, trace.SpanKindClient, spans[0].SpanKind())
	a := oteltest.SpanAttributes(spans[0])
	require.Equal(t, "claude-test", a["gen_ai.request.model"])
	require.Equal(t, "100", a["gen_ai.request.max_tokens"])
	require.Equal(t, "0.5", a["gen_ai.request.temperature"])
}

// countingSampler drops every span and counts the ones it was asked about.
type countingSampler struct{ asked map[string]int }

func (s *countingSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.asked[p.Name]++
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (s *countingSampler) Description() string { return "counting" }

// TestSpansSampledOut checks that a provider dropping spans still decides
// on every one: only an untraced run (no provider) skips inner spans.
func TestSpansSampledOut(t *testing.T) {
	sampler := &countingSampler{asked: map[string]int{}}
	suspendAndResume(t, sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler)))
	require.Equal(t, map[string]int{
		"markov.run": 2, "markov.step": 2, "chat": 2, "execute_tool ask": 1, "markov.suspend": 1, "markov.resume": 1,
	}, sampler.asked)
}

// TestResumeLinksToSuspension checks that the run that resumes a
// suspension, and its resume span, link to the span that created it —
// also when the machine was serialized and loaded against a fresh
// charter with a tracer provider of its own, as in another process.
func TestResumeLinksToSuspension(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(map[bool]string{false: "same machine", true: "reloaded"}[reload], func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			cfg := machine.CharterConfig{
				Model: scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Text("ok")),
				Nodes: []*node.Node{suspendNode(t), doneNode(t)}, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
			}
			m := newMachine(t, charterCfg(t, cfg), "desk")
			steps := run(t, m, machine.UserText("go"))
			call := steps[len(steps)-1].Suspensions[0]
			suspend := oteltest.SpansNamed(rec.Ended(), "markov.suspend")
			require.Len(t, suspend, 1)
			require.NotEmpty(t, call.TraceParent, "the suspension remembers its span")

			resumed := rec
			if reload {
				data, err := serialize.Marshal(m)
				require.NoError(t, err)
				resumed = tracetest.NewSpanRecorder()
				cfg.Model = scripted.New(scripted.Text("ok"))
				cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(resumed))
				m, err = serialize.Unmarshal(charterCfg(t, cfg), data)
				require.NoError(t, err)
			}
			run(t, m, machine.ResumeInput{SuspendID: call.SuspendID, Payload: "yes"})
			runs := oteltest.SpansNamed(resumed.Ended(), "markov.run")
			oteltest.RequireLinked(t, runs[len(runs)-1], suspend[0].SpanContext(), call.SuspendID)
			oteltest.RequireLinked(t, oteltest.SpansNamed(resumed.Ended(), "markov.resume")[0], suspend[0].SpanContext(), call.SuspendID)
		})
	}
}

// TestMetrics checks the metrics of a tool round, a suspension resumed
// and one cancelled, read through the SDK's manual reader.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	usage := llm.Usage{InputTokens: 10, OutputTokens: 3, CacheReadTokens: 5}
	model := scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "add1", Input: empty{}}}, Usage: usage},
		scripted.Reply{Calls: []scripted.Call{{Name: "ask", Input: askIn{"a"}}, {Name: "ask2", Input: askIn{"b"}}}, Usage: usage},
		scripted.Reply{Text: "done", Usage: usage},
	)
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{suspendNode(t), doneNode(t)},
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	m := newMachine(t, c, "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	require.Len(t, ids, 2)
	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "yes"}, machine.CancelInput{SuspendID: ids[1]})

	got := oteltest.CollectMetrics(t, reader)
	require.Equal(t, map[string]int64{"input": 3 * 15, "output": 3 * 3},
		oteltest.HistogramSums[int64](got, "gen_ai.client.token.usage", "gen_ai.token.type"))
	require.Equal(t, map[string]uint64{"chat": 3}, oteltest.HistogramCounts(got, "gen_ai.client.operation.duration", "gen_ai.operation.name"))
	require.Equal(t, map[string]uint64{"ok": 1, "suspended": 2}, oteltest.HistogramCounts(got, "markov.tool.duration", "markov.outcome"))
	require.Equal(t, map[string]int64{"tool": 2}, oteltest.Sums(got, "markov.suspensions.created", "markov.kind"))
	require.Equal(t, map[string]int64{"resumed": 1, "cancelled": 1}, oteltest.Sums(got, "markov.suspensions.resolved", "markov.outcome"))
}

// TestNoProviderNoSpans checks that a run with neither provider
// configured records nothing and leaves suspensions without a trace.
func TestNoProviderNoSpans(t *testing.T) {
	model := scripted.New(scripted.Tool("ask", askIn{"x"}))
	m := deskMachine(t, model)
	steps := run(t, m, machine.UserText("go"))
	require.Empty(t, steps[len(steps)-1].Suspensions[0].TraceParent)
}

// suspendAndResume runs a tool call that suspends, then resumes it, on a
// charter tracing to tp; it returns the suspend ID.
func suspendAndResume(t *testing.T, tp *sdktrace.TracerProvider) string {
	t.Helper()
	model := scripted.New(scripted.Tool("ask", askIn{"x"}), scripted.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 7, OutputTokens: 2}})
	c := charterCfg(t, machine.CharterConfig{Model: model, Nodes: []*node.Node{suspendNode(t), doneNode(t)}, TracerProvider: tp})
	m := newMachine(t, c, "desk")
	ids := pendingIDs(run(t, m, machine.UserText("go")))
	run(t, m, machine.ResumeInput{SuspendID: ids[0], Payload: "yes"})
	return ids[0]
}

// globalProviderSet is whether TestGlobalProviderSetLater has set otel's
// global tracer provider in this process.
var globalProviderSet atomic.Bool

// TestGlobalProviderSetLater checks that a charter built on otel's
// global tracer provider before any was set (untraced: its runs start no
// spans) traces once one is set, as the global provider's tracers do.
func TestGlobalProviderSetLater(t *testing.T) {
	if globalProviderSet.Swap(true) {
		t.Skip("otel's global provider delegates only until it is first set: once per process (-count=1)")
	}
	c := charter(t, scripted.New(scripted.Text("hi"), scripted.Text("again")), doneNode(t))
	m := newMachine(t, c, "done")
	run(t, m, machine.UserText("hello"))
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	run(t, m, machine.UserText("hello again"))
	require.Len(t, oteltest.SpansNamed(rec.Ended(), "markov.run"), 1)
	require.Len(t, oteltest.SpansNamed(rec.Ended(), "chat"), 1)
}
