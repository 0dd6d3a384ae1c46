package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// exportedValue ends a span carrying value and returns the attribute as
// exported.
func exportedValue(t *testing.T, value string) string {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp, err := New(context.Background(), Options{Exporter: exp, Synchronous: true, SamplingRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	_, span := tp.Tracer("test").Start(context.Background(), "turn")
	span.SetAttributes(attribute.String("acpgate.stop_reason", value))
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || len(spans[0].Attributes) != 1 {
		t.Fatalf("exported %v", spans)
	}
	return spans[0].Attributes[0].Value.AsString()
}

func TestASpanAttributeIsCutTo4KiBUnlessTheEnvironmentSetsTheBound(t *testing.T) {
	huge := strings.Repeat("x", 1<<20) // an agent's multi-megabyte stop reason
	if got := exportedValue(t, huge); len(got) != maxAttributeBytes {
		t.Errorf("a 1 MiB attribute exported as %d bytes, want %d", len(got), maxAttributeBytes)
	}
	if got := exportedValue(t, "end_turn"); got != "end_turn" {
		t.Errorf("a short attribute exported as %q", got)
	}
	t.Setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100")
	if got := exportedValue(t, huge); len(got) != 100 {
		t.Errorf("with OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT=100, exported %d bytes", len(got))
	}
}
