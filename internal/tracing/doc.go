// Package tracing builds the gateway's OpenTelemetry tracer provider (an
// OTLP exporter over gRPC or HTTP behind a batcher), the propagator it
// uses on the wire, the environment an agent gets so that its own traces
// reach the same collector, and a log handler that stamps records with the
// active span.
//
// Nothing here is global: the caller owns the provider it gets from New,
// passes it (and Propagator's result) to whatever creates spans, and
// shuts it down. The otel globals are never set, so two gateways in one
// process (tests, the benchmark harness) never see each other's spans.
package tracing
