package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestLogRecordsCarryTheActiveSpansIdsAndNothingWithoutOne(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("agent", "a")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.InfoContext(ctx, "in a span")
	log.InfoContext(context.Background(), "outside")
	dec := json.NewDecoder(&buf)
	var in, out map[string]any
	if err := dec.Decode(&in); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != tid.String() || in["span_id"] != sid.String() || in["agent"] != "a" {
		t.Errorf("a record in a span: %v", in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("a record outside any span carries a trace id: %v", out)
	}
}

func TestAgentsGetTheOTLPVariablesAndTheResourceAttributesButNotTheServiceName(t *testing.T) {
	got := AgentEnv([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318",
		"OTEL_EXPORTER_OTLP_HEADERS=x-token=1",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod",
		"OTEL_SERVICE_NAME=acpgate",
		"SECRET_API_KEY=k",
		"PATH=/bin",
	})
	want := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318",
		"OTEL_EXPORTER_OTLP_HEADERS=x-token=1",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod",
	}
	if !slices.Equal(got, want) {
		t.Errorf("AgentEnv = %q, want %q", got, want)
	}
}

func TestTheProtocolComesFromTheOptionsThenTheEnvironmentThenIsGRPC(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, ProtocolGRPC},
		{Options{Protocol: ProtocolHTTP, LookupEnv: env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})}, ProtocolHTTP},
		{Options{LookupEnv: env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})}, ProtocolHTTP},
		{Options{LookupEnv: env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})}, ProtocolGRPC},
	} {
		got, err := resolveProtocol(tc.opts)
		if err != nil || got != tc.want {
			t.Errorf("%+v: got %q, %v; want %q", tc.opts, got, err, tc.want)
		}
	}
	if _, err := resolveProtocol(Options{LookupEnv: env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})}); err == nil {
		t.Error("http/json, which the Go exporters do not speak, was accepted")
	}
}
