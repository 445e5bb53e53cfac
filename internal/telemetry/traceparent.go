package telemetry

import (
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// traceParentLen is the length of a version 00 W3C traceparent:
// "00-" 32 hex "-" 16 hex "-" 2 hex.
const traceParentLen = 55

// TraceParent returns sc in the W3C traceparent form
// ("00-<trace ID>-<span ID>-<flags>"), or "" when sc is not valid.
func TraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [traceParentLen]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// SpanContextOf parses a traceparent TraceParent wrote into a remote span
// context; ok is false for anything else (a malformed or future-version
// value is ignored, never an error: it only ever feeds a span link).
func SpanContextOf(tp string) (sc trace.SpanContext, ok bool) {
	if len(tp) != traceParentLen || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if _, err := hex.Decode(tid[:], []byte(tp[3:35])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(tp[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(flags[:], []byte(tp[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}

// Link is the span link to the span a suspension recorded as tp (its
// TraceParent); ok is false when tp names none.
func Link(tp string, suspendID string) (trace.Link, bool) {
	sc, ok := SpanContextOf(tp)
	if !ok {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{suspendIDKey.String(suspendID)}}, true
}

// suspendIDKey names the suspension a link stands for.
const suspendIDKey = attribute.Key("markov.suspend_id")
