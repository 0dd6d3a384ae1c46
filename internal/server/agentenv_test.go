package server

import (
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/acpgate/acpgate/internal/config"
)

func TestATracingGatewaysAgentsGetItsOTLPVariablesUnderTheirOwnSettings(t *testing.T) {
	a := config.Agent{Env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-agent=1", "MODEL": "m"}, InheritEnv: []string{"PATH"}}
	lookup := func(k string) (string, bool) { return map[string]string{"PATH": "/bin"}[k], k == "PATH" }
	environ := []string{"PATH=/bin", "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318", "OTEL_EXPORTER_OTLP_HEADERS=x-gateway=1", "OTEL_SERVICE_NAME=acpgate", "SECRET=s"}

	if got, want := agentEnviron(a, Options{Environ: environ}, lookup), []string{"MODEL=m", "OTEL_EXPORTER_OTLP_HEADERS=x-agent=1", "PATH=/bin"}; !slices.Equal(got, want) {
		t.Errorf("without tracing: %q, want only the agent's own %q", got, want)
	}
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(t.Context()) }()
	got := agentEnviron(a, Options{Environ: environ, TracerProvider: tp}, lookup)
	want := []string{"MODEL=m", "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318", "OTEL_EXPORTER_OTLP_HEADERS=x-agent=1", "PATH=/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("with tracing: %q, want %q", got, want)
	}
}
