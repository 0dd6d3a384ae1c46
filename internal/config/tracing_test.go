package config

import (
	"strings"
	"testing"
)

func TestTracingIsOffByDefaultAndSamplesEveryTraceOnceEnabled(t *testing.T) {
	c, err := Parse([]byte(agentYAML), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing != (Tracing{SamplingRatio: 1}) {
		t.Errorf("defaults: %+v", c.Tracing)
	}
	c, err = Parse([]byte(agentYAML+`tracing:
  enabled: true
  protocol: http
  endpoint: "http://collector:4318/v1/traces"
  sampling_ratio: 0.25
`), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Tracing{Enabled: true, Protocol: TracingHTTP, Endpoint: "http://collector:4318/v1/traces", SamplingRatio: 0.25}
	if c.Tracing != want {
		t.Errorf("got %+v, want %+v", c.Tracing, want)
	}
	c, err = Parse([]byte(agentYAML+"tracing: {enabled: true, protocol: grpc, endpoint: \"collector:4317\", insecure: true, sampling_ratio: 0}\n"), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Tracing{Enabled: true, Protocol: TracingGRPC, Endpoint: "collector:4317", Insecure: true}); c.Tracing != want {
		t.Errorf("got %+v, want %+v", c.Tracing, want)
	}
}

func TestTracingSettingsAreValidatedWithMessagesNamingTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tracing: {protocol: zipkin}\n", `tracing.protocol: "zipkin" must be grpc or http`},
		{"tracing: {protocol: http/protobuf}\n", `tracing.protocol: "http/protobuf" must be grpc or http`},
		{"tracing: {sampling_ratio: 1.5}\n", "tracing.sampling_ratio: must be between 0 and 1 (the fraction of new traces sampled), got 1.5"},
		{"tracing: {sampling_ratio: -0.1}\n", "tracing.sampling_ratio: must be between 0 and 1"},
		{"tracing: {sampling_ratio: half}\n", `tracing.sampling_ratio: expected a number, got "half"`},
		{"tracing: {endpoint: collector}\n", `tracing.endpoint: "collector" is neither a host:port address nor an http:// or https:// URL`},
		{"tracing: {endpoint: \"ftp://collector:21\"}\n", `tracing.endpoint: "ftp://collector:21" must be http:// or https://`},
		{"tracing: {enabled: maybe}\n", "tracing.enabled: expected true or false"},
		{"tracing: {sampling: 1}\n", `unknown key "sampling" in tracing`},
	} {
		_, err := Parse([]byte(agentYAML+tc.yaml), "c.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
