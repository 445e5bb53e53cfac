// Package tracing starts markov's spans inside a run (step, model call,
// tool, suspend, resume), and none in a run that no tracer provider
// records: a span costs allocations even when the provider drops it, and
// every round would pay them.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

type offKey struct{}

// Run returns the context of a run whose span is run: marked untraced when
// run neither records nor carries a trace, as the spans of the global
// provider do before one is installed, and noop's.
func Run(ctx context.Context, run trace.Span) context.Context {
	if run.IsRecording() || run.SpanContext().IsValid() {
		return ctx
	}
	return context.WithValue(ctx, offKey{}, true)
}

// Start starts the span name with tracer, or, in an untraced run, returns
// ctx and the run's span as they are.
func Start(ctx context.Context, tracer trace.Tracer, name string) (context.Context, trace.Span) {
	if ctx.Value(offKey{}) != nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(ctx, name)
}

// Off reports whether ctx is inside an untraced run: a span name or
// attributes built for it would be wasted.
func Off(ctx context.Context) bool { return ctx.Value(offKey{}) != nil }
