package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/markov-agents/markov/internal/telemetry"
	"github.com/markov-agents/markov/llm/scripted"
)

func spanContext(flags trace.TraceFlags) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: flags,
	})
}

func TestTraceParentRoundTrip(t *testing.T) {
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := spanContext(flags)
		tp := telemetry.TraceParent(sc)
		require.Equal(t, fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-%02x", byte(flags)), tp)
		got, ok := telemetry.SpanContextOf(tp)
		require.True(t, ok)
		require.True(t, got.IsRemote())
		require.Equal(t, sc.TraceID(), got.TraceID())
		require.Equal(t, sc.SpanID(), got.SpanID())
		require.Equal(t, flags, got.TraceFlags())
		l, ok := telemetry.Link(tp, "s-1")
		require.True(t, ok)
		require.Equal(t, got, l.SpanContext)
	}
	require.Empty(t, telemetry.TraceParent(trace.SpanContext{}), "no span, no traceparent")
}

func TestSpanContextOfRefuses(t *testing.T) {
	for _, tp := range []string{
		"",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // a future version
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",   // short
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",  // not hex
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace ID
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span ID
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // bad separator
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", // long
	} {
		_, ok := telemetry.SpanContextOf(tp)
		require.False(t, ok, tp)
		_, ok = telemetry.Link(tp, "s")
		require.False(t, ok, tp)
	}
}

// FuzzSpanContextOf feeds persisted traceparents of any shape: never a
// panic, and whatever parses formats back to itself.
func FuzzSpanContextOf(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00")
	f.Add("")
	f.Add("00--")
	f.Fuzz(func(t *testing.T, tp string) {
		sc, ok := telemetry.SpanContextOf(tp)
		if !ok {
			return
		}
		again, ok := telemetry.SpanContextOf(telemetry.TraceParent(sc))
		require.True(t, ok)
		require.True(t, again.Equal(sc))
	})
}

func TestNames(t *testing.T) {
	require.Equal(t, "chat", telemetry.ChatSpanName(""))
	require.Equal(t, "chat gpt-4.1", telemetry.ChatSpanName("gpt-4.1"))
	require.Equal(t, "execute_tool lookup", telemetry.ToolSpanName("lookup"))
	require.Equal(t, "scripted", telemetry.ProviderOf(scripted.New()))
	require.Equal(t, telemetry.UnknownProvider, telemetry.ProviderOf(nil))
}

func TestErrorType(t *testing.T) {
	require.Equal(t, "timeout", telemetry.ErrorType(fmt.Errorf("call: %w", context.DeadlineExceeded)))
	require.Equal(t, "canceled", telemetry.ErrorType(context.Canceled))
	require.Equal(t, "_OTHER", telemetry.ErrorType(errors.New("boom")))
}
