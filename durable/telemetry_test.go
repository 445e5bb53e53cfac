package durable_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/internal/oteltest"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/store"
)

// process is a runner as one process has it: a charter of its own, with
// its own span recorder and metric reader.
type process struct {
	runner *durable.Runner
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newProcess(t *testing.T, s store.Store) *process {
	t.Helper()
	p := &process{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	c, err := buildCharter(agentModel(0), func(cfg *machine.CharterConfig) {
		cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
		cfg.MeterProvider = mp
	})
	require.NoError(t, err)
	p.runner, err = durable.New(durable.Config{Store: s, Charter: c, MeterProvider: mp})
	require.NoError(t, err)
	return p
}

// TestResumeLinksAcrossProcesses suspends a machine in one runner and
// resumes it in a fresh one on the same store: the resuming run's span
// links to the span that created the suspension in the first, and the
// runners' metrics count saves and the pending suspensions of the index.
func TestResumeLinksAcrossProcesses(t *testing.T) {
	forEachStore(t, func(t *testing.T, s store.Store) {
		first := newProcess(t, s)
		id := suspended(t, first.runner, "m1")
		suspend := oteltest.SpansNamed(first.spans.Ended(), "markov.suspend")
		require.Len(t, suspend, 1)

		got := oteltest.CollectMetrics(t, first.reader)
		pending, ok := oteltest.Gauge(got, "markov.suspensions.pending")
		require.True(t, ok)
		require.Equal(t, int64(1), pending)
		saves := oteltest.HistogramCounts(got, "markov.durable.save.duration", "markov.outcome")
		require.Positive(t, saves["ok"])
		require.Equal(t, map[string]int64{"tool": 1}, oteltest.Sums(got, "markov.suspensions.created", "markov.kind"))

		second := newProcess(t, s)
		_, err := runSteps(second.runner.Resume(context.Background(), machine.ResumeInput{SuspendID: id, Payload: "approved"}))
		require.NoError(t, err)
		runs := oteltest.SpansNamed(second.spans.Ended(), "markov.run")
		require.NotEmpty(t, runs)
		oteltest.RequireLinked(t, runs[0], suspend[0].SpanContext(), id)
		require.NotEqual(t, suspend[0].SpanContext().TraceID(), runs[0].SpanContext().TraceID(),
			"the resume runs in a trace of its own, linked to the wait")

		got = oteltest.CollectMetrics(t, second.reader)
		pending, _ = oteltest.Gauge(got, "markov.suspensions.pending")
		require.Zero(t, pending)
		require.Equal(t, map[string]int64{"resumed": 1}, oteltest.Sums(got, "markov.suspensions.resolved", "markov.outcome"))
	})
}
