package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Protocols of Options.Protocol.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// maxAttributeBytes bounds a span attribute's value, unless
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT sets the bound. Some attributes
// are an agent's words (its stop reason, its session id, a permission
// option's id), bounded only by the frame limit (16 MiB), and the SDK's
// own default keeps them whole: an agent answering with strings of
// megabytes would have the export queue (2,048 spans) hold that much per
// span, and the collector receive it.
const maxAttributeBytes = 4096

// ServiceName is the service.name of the gateway's spans, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
const ServiceName = "acpgate"

// Options configure New. The zero value of every field defers to the
// exporter's own defaults and the OTEL_* environment.
type Options struct {
	// Protocol is ProtocolGRPC or ProtocolHTTP; empty means
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL
	// ("grpc", or "http/protobuf"), then gRPC.
	Protocol string
	// Endpoint is host:port, or a URL (whose scheme decides TLS and, for
	// HTTP, whose path is used as is). Empty: the exporter reads
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
	// Insecure disables TLS for a host:port Endpoint.
	Insecure bool
	// SamplingRatio is the fraction of new root traces sampled; spans
	// with a parent follow the parent's decision.
	SamplingRatio float64
	// ServiceVersion is the resource's service.version.
	ServiceVersion string
	// LookupEnv reads the protocol variables; nothing is read when nil.
	// (The exporters and the resource read their own variables from the
	// process environment.)
	LookupEnv func(string) (string, bool)
	// Exporter, when set, receives the spans instead of an OTLP exporter:
	// for tests and for measuring the instrumentation without a collector.
	Exporter sdktrace.SpanExporter
	// Synchronous exports each span as it ends instead of in batches, for
	// tests that read an in-memory exporter right after a call.
	Synchronous bool
}

// New builds a tracer provider exporting over OTLP. The exporter connects
// lazily, so an unreachable collector is not an error here: spans are
// dropped (and the SDK logs why) rather than holding up the gateway. The
// caller must Shutdown the provider, which flushes what is batched.
func New(ctx context.Context, opts Options) (*sdktrace.TracerProvider, error) {
	exp := opts.Exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(ctx, opts); err != nil {
			return nil, err
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(opts.ServiceVersion)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: building the resource: %w", err)
	}
	spans := sdktrace.WithBatcher(exp)
	if opts.Synchronous {
		spans = sdktrace.WithSyncer(exp)
	}
	limits := sdktrace.NewSpanLimits() // the OTEL_SPAN_* variables
	if _, set := os.LookupEnv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"); !set {
		limits.AttributeValueLengthLimit = maxAttributeBytes
	}
	return sdktrace.NewTracerProvider(
		spans,
		sdktrace.WithRawSpanLimits(limits),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(opts.SamplingRatio))),
	), nil
}

// newExporter builds the OTLP exporter the options name.
func newExporter(ctx context.Context, opts Options) (sdktrace.SpanExporter, error) {
	protocol, err := resolveProtocol(opts)
	if err != nil {
		return nil, err
	}
	if protocol == ProtocolHTTP {
		return otlptracehttp.New(ctx, endpointOptions(opts, otlptracehttp.WithEndpointURL, otlptracehttp.WithEndpoint, otlptracehttp.WithInsecure)...)
	}
	return otlptracegrpc.New(ctx, endpointOptions(opts, otlptracegrpc.WithEndpointURL, otlptracegrpc.WithEndpoint, otlptracegrpc.WithInsecure)...)
}

// endpointOptions are an exporter's options for Options.Endpoint and
// Insecure, given its option constructors: none for an empty endpoint, so
// that the exporter reads the OTEL_* variables. A URL's scheme decides TLS
// itself.
func endpointOptions[O any](opts Options, withURL, withHostPort func(string) O, withInsecure func() O) []O {
	switch {
	case opts.Endpoint == "":
		if opts.Insecure {
			return []O{withInsecure()}
		}
		return nil
	case strings.Contains(opts.Endpoint, "://"):
		return []O{withURL(opts.Endpoint)}
	case opts.Insecure:
		return []O{withHostPort(opts.Endpoint), withInsecure()}
	default:
		return []O{withHostPort(opts.Endpoint)}
	}
}

// resolveProtocol is Options.Protocol, or what the environment names.
func resolveProtocol(opts Options) (string, error) {
	if opts.Protocol != "" {
		return opts.Protocol, nil
	}
	if opts.LookupEnv == nil {
		return ProtocolGRPC, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v, ok := opts.LookupEnv(name)
		if !ok || v == "" {
			continue
		}
		switch v {
		case "grpc":
			return ProtocolGRPC, nil
		case "http/protobuf":
			return ProtocolHTTP, nil
		default:
			return "", fmt.Errorf("tracing: %s=%q: acpgate exports OTLP as grpc or http/protobuf", name, v)
		}
	}
	return ProtocolGRPC, nil
}
