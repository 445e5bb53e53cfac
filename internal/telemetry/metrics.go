package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"

	"github.com/markov-agents/markov/llm"
)

// Metric names markov defines beside the GenAI conventions' own.
const (
	MetricToolDuration        = "markov.tool.duration"
	MetricSuspensionsCreated  = "markov.suspensions.created"
	MetricSuspensionsResolved = "markov.suspensions.resolved"
	MetricSuspensionsPending  = "markov.suspensions.pending"
	MetricSaveDuration        = "markov.durable.save.duration"
)

// Attribute keys of markov's metrics.
const (
	KindKey    = attribute.Key("markov.kind")
	OutcomeKey = attribute.Key("markov.outcome")
)

// The conventions' advised bucket boundaries.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// Metrics are markov's instruments, all from one meter. The zero value is
// not usable; New never fails (an instrument the meter refuses is a no-op).
type Metrics struct {
	tokens   genaiconv.ClientTokenUsage
	duration genaiconv.ClientOperationDuration
	tool     metric.Float64Histogram
	created  metric.Int64Counter
	resolved metric.Int64Counter
	save     metric.Float64Histogram
}

// New returns markov's instruments of meter (no-ops if meter is nil).
func New(meter metric.Meter) *Metrics {
	if meter == nil {
		meter = noop.NewMeterProvider().Meter(ScopeName)
	}
	m := &Metrics{}
	m.tokens, _ = genaiconv.NewClientTokenUsage(meter, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	m.duration, _ = genaiconv.NewClientOperationDuration(meter, metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.tool = histogram(meter, MetricToolDuration, "Duration of tool executions.")
	m.save = histogram(meter, MetricSaveDuration, "Duration of durable saves.")
	m.created = counter(meter, MetricSuspensionsCreated, "Suspensions created.")
	m.resolved = counter(meter, MetricSuspensionsResolved, "Suspensions resolved, by outcome (resumed, expired, cancelled).")
	return m
}

func histogram(meter metric.Meter, name, desc string) metric.Float64Histogram {
	h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return noop.Float64Histogram{}
	}
	return h
}

func counter(meter metric.Meter, name, desc string) metric.Int64Counter {
	c, err := meter.Int64Counter(name, metric.WithUnit("{suspension}"), metric.WithDescription(desc))
	if err != nil {
		return noop.Int64Counter{}
	}
	return c
}

// ModelOn reports whether a model call's measurements would be recorded:
// when it is false, skip timing the call.
func (m *Metrics) ModelOn(ctx context.Context) bool {
	return m.tokens.Enabled(ctx) || m.duration.Enabled(ctx)
}

// Model records a model call of provider that took d: its duration, and
// its tokens in and out when it succeeded.
func (m *Metrics) Model(ctx context.Context, provider string, req *llm.Request, resp *llm.Response, d time.Duration, err error) {
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.GenAIOperationNameKey.String(OpChat), semconv.GenAIProviderNameKey.String(provider))
	if req.Settings.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModelKey.String(req.Settings.Model))
	}
	if resp != nil && resp.Model != "" {
		attrs = append(attrs, semconv.GenAIResponseModelKey.String(resp.Model))
	}
	if err != nil {
		m.duration.RecordSet(ctx, d.Seconds(), attribute.NewSet(append(attrs, ErrorAttribute(err))...))
		return
	}
	m.duration.RecordSet(ctx, d.Seconds(), attribute.NewSet(attrs...))
	n := len(attrs)
	in := attribute.NewSet(append(attrs[:n:n], semconv.GenAITokenTypeInput)...)
	out := attribute.NewSet(append(attrs[:n:n], semconv.GenAITokenTypeOutput)...)
	m.tokens.RecordSet(ctx, int64(InputTokens(resp.Usage)), in)
	m.tokens.RecordSet(ctx, int64(resp.Usage.OutputTokens), out)
}

// ToolOn reports whether tool durations are recorded.
func (m *Metrics) ToolOn(ctx context.Context) bool { return m.tool.Enabled(ctx) }

// Tool records a call of the tool name that ended with outcome (ok,
// error, suspended, timeout) after d.
func (m *Metrics) Tool(ctx context.Context, name, outcome string, d time.Duration) {
	m.tool.Record(ctx, d.Seconds(), metric.WithAttributes(semconv.GenAIToolNameKey.String(name), OutcomeKey.String(outcome)))
}

// Created counts a suspension of kind created.
func (m *Metrics) Created(ctx context.Context, kind string) {
	if m.created.Enabled(ctx) {
		m.created.Add(ctx, 1, metric.WithAttributes(KindKey.String(kind)))
	}
}

// Resolved counts a suspension of kind resolved with outcome (resumed,
// expired, cancelled).
func (m *Metrics) Resolved(ctx context.Context, kind, outcome string) {
	if m.resolved.Enabled(ctx) {
		m.resolved.Add(ctx, 1, metric.WithAttributes(KindKey.String(kind), OutcomeKey.String(outcome)))
	}
}

// SaveOn reports whether save durations are recorded.
func (m *Metrics) SaveOn(ctx context.Context) bool { return m.save.Enabled(ctx) }

// Save records a durable save that started at start and failed with *err
// (nil: it succeeded), for a defer.
func (m *Metrics) Save(ctx context.Context, start time.Time, err *error) {
	d := time.Since(start).Seconds()
	if *err == nil {
		m.save.Record(ctx, d, metric.WithAttributes(OutcomeKey.String("ok")))
		return
	}
	m.save.Record(ctx, d, metric.WithAttributes(OutcomeKey.String("error"), ErrorAttribute(*err)))
}

// PendingGauge registers the observable gauge of pending suspensions on
// meter, fed by count at every collection. Unregister the returned
// registration when the source goes away.
func PendingGauge(meter metric.Meter, count func(context.Context) (int64, error)) (metric.Registration, error) {
	g, err := meter.Int64ObservableGauge(MetricSuspensionsPending, metric.WithUnit("{suspension}"),
		metric.WithDescription("Suspensions pending, as the store's index lists them."))
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		n, err := count(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(g, n)
		return nil
	}, g)
}
