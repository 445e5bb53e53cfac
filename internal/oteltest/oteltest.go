// Package oteltest holds the helpers tests share to read what markov
// recorded through the OpenTelemetry SDK's in-memory span recorder and
// manual metric reader. Only _test.go files import it.
package oteltest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SpanAttributes returns the attributes of s as strings, by key.
func SpanAttributes(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// SpansNamed returns the spans of spans named name, in order.
func SpansNamed(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// RequireLinked fails t unless s links to the span sc for the suspension
// suspendID.
func RequireLinked(t testing.TB, s sdktrace.ReadOnlySpan, sc trace.SpanContext, suspendID string) {
	t.Helper()
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			require.Equal(t, sc.TraceFlags(), l.SpanContext.TraceFlags(), "link flags")
			require.Contains(t, l.Attributes, attribute.String("markov.suspend_id", suspendID))
			return
		}
	}
	t.Fatalf("span %s has no link to %s (links: %v)", s.Name(), sc.SpanID(), s.Links())
}

// CollectMetrics reads every metric reader has.
func CollectMetrics(t testing.TB, reader *sdkmetric.ManualReader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	return rm
}

// metricNamed returns the data of the metric name in rm, or nil.
func metricNamed(rm metricdata.ResourceMetrics, name string) metricdata.Aggregation {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data
			}
		}
	}
	return nil
}

// HistogramSums returns the sums of the histogram name by the value of
// its attribute key.
func HistogramSums[N int64 | float64](rm metricdata.ResourceMetrics, name string, key attribute.Key) map[string]N {
	h, ok := metricNamed(rm, name).(metricdata.Histogram[N])
	if !ok {
		return nil
	}
	return byValue(h.DataPoints, key, func(p metricdata.HistogramDataPoint[N]) (attribute.Set, N) { return p.Attributes, p.Sum })
}

// HistogramCounts returns the counts of the float histogram name by the
// value of its attribute key.
func HistogramCounts(rm metricdata.ResourceMetrics, name string, key attribute.Key) map[string]uint64 {
	h, ok := metricNamed(rm, name).(metricdata.Histogram[float64])
	if !ok {
		return nil
	}
	return byValue(h.DataPoints, key, func(p metricdata.HistogramDataPoint[float64]) (attribute.Set, uint64) { return p.Attributes, p.Count })
}

// Sums returns the values of the int sum (a counter) name by the value of
// its attribute key.
func Sums(rm metricdata.ResourceMetrics, name string, key attribute.Key) map[string]int64 {
	s, ok := metricNamed(rm, name).(metricdata.Sum[int64])
	if !ok {
		return nil
	}
	return byValue(s.DataPoints, key, func(p metricdata.DataPoint[int64]) (attribute.Set, int64) { return p.Attributes, p.Value })
}

// byValue adds up the values of points by the value of their attribute
// key; of gives a point's attributes and value.
func byValue[P any, V int64 | uint64 | float64](points []P, key attribute.Key, of func(P) (attribute.Set, V)) map[string]V {
	out := map[string]V{}
	for _, p := range points {
		attrs, v := of(p)
		k, _ := attrs.Value(key)
		out[k.Emit()] += v
	}
	return out
}

// Gauge returns the last value of the int gauge name, and whether it has
// one.
func Gauge(rm metricdata.ResourceMetrics, name string) (int64, bool) {
	g, ok := metricNamed(rm, name).(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) == 0 {
		return 0, false
	}
	return g.DataPoints[len(g.DataPoints)-1].Value, true
}
