package tracing

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestUntracedRunStartsNoSpans(t *testing.T) {
	tracer := noop.NewTracerProvider().Tracer("")
	ctx, run := tracer.Start(context.Background(), "run")
	ctx = Run(ctx, run)
	var got trace.Span
	allocs := testing.AllocsPerRun(100, func() {
		var inner context.Context
		inner, got = Start(ctx, tracer, "step")
		require.Equal(t, ctx, inner)
	})
	require.Zero(t, allocs)
	require.Equal(t, run, got)
}

func TestTracedRunStartsSpans(t *testing.T) {
	for name, tp := range map[string]*sdktrace.TracerProvider{
		"recording": sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder())),
		// A provider that drops spans still decides on each one.
		"sampled out": sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())),
	} {
		t.Run(name, func(t *testing.T) {
			tracer := tp.Tracer("")
			ctx, run := tracer.Start(context.Background(), "run")
			ctx = Run(ctx, run)
			_, span := Start(ctx, tracer, "step")
			require.NotEqual(t, run.SpanContext().SpanID(), span.SpanContext().SpanID())
			require.Equal(t, run.SpanContext().TraceID(), span.SpanContext().TraceID())
		})
	}
}
