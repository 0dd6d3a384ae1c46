package tracing

import (
	"os"
	"strings"
)

// AgentEnv returns the OTLP variables of environ ("K=V", os.Environ when
// nil) that an agent gets when the gateway traces, so that an agent that
// traces exports its spans to the same collector, joining the trace that
// _meta.traceparent carries to it: where to export (OTEL_EXPORTER_OTLP_*:
// endpoint, protocol, headers, certificates, timeouts) and the
// deployment's OTEL_RESOURCE_ATTRIBUTES. OTEL_SERVICE_NAME is not among
// them: an agent is its own service, not acpgate.
func AgentEnv(environ []string) []string {
	if environ == nil {
		environ = os.Environ()
	}
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && (strings.HasPrefix(name, "OTEL_EXPORTER_OTLP_") || name == "OTEL_RESOURCE_ATTRIBUTES") {
			out = append(out, kv)
		}
	}
	return out
}
