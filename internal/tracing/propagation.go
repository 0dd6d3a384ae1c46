package tracing

import "go.opentelemetry.io/otel/propagation"

// Propagator is what the gateway reads from callers' metadata and writes
// into agents' _meta: W3C trace context (traceparent, tracestate) and
// baggage, the keys ACP reserves in _meta.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}
