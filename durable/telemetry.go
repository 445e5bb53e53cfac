package durable

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/store"
)

// instrument creates the runner's metrics on mp (the global provider if
// nil): save latency, and the gauge of pending suspensions, counted from
// the store's index when a reader collects.
func (r *Runner) instrument(mp metric.MeterProvider) error {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(telemetry.ScopeName)
	r.met = telemetry.New(meter)
	_, err := telemetry.PendingGauge(meter, func(ctx context.Context) (int64, error) {
		pending, err := r.store.ListSuspensions(ctx, store.Filter{Status: store.StatusPending})
		return int64(len(pending)), err
	})
	if err != nil {
		return fmt.Errorf("%w: metrics: %w", ErrInvalidConfig, err)
	}
	return nil
}
