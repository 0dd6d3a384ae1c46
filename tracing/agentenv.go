package tracing

import (
	"os"
	"slices"
	"strings"
)

// AgentEnvPrefix and AgentEnvNames are the variables of the gateway's
// environment that AgentEnv passes to agents: where to export (endpoint,
// protocol, headers, certificates, timeouts) and the deployment's
// resource attributes. OTEL_SERVICE_NAME is not among them: an agent is
// its own service, not acpgate.
const AgentEnvPrefix = "OTEL_EXPORTER_OTLP_"

// AgentEnvNames are the variables passed besides those with AgentEnvPrefix.
var AgentEnvNames = []string{"OTEL_RESOURCE_ATTRIBUTES"}

// AgentEnv returns the OTLP variables of environ ("K=V", os.Environ when
// nil) that an agent gets when the gateway traces, so that an agent that
// traces exports its spans to the same collector, joining the trace that
// _meta.traceparent carries to it.
func AgentEnv(environ []string) []string {
	if environ == nil {
		environ = os.Environ()
	}
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if strings.HasPrefix(name, AgentEnvPrefix) || slices.Contains(AgentEnvNames, name) {
			out = append(out, kv)
		}
	}
	return out
}
