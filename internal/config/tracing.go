package config

import (
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Tracing is the OpenTelemetry trace export: off unless Enabled.
//
// The keys set here win over the standard OTEL_* environment variables;
// the keys left out fall back to them, because the OTLP exporters read
// OTEL_EXPORTER_OTLP_* (endpoint, headers, certificates, timeout,
// compression) themselves when an option is not given explicitly. So an
// operator can keep the collector's address and credentials in the
// environment, as every other OpenTelemetry-instrumented process of the
// deployment does, and the file only says that acpgate traces.
type Tracing struct {
	// Enabled turns tracing on.
	Enabled bool
	// Protocol is the OTLP transport: TracingGRPC or TracingHTTP; empty
	// means OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
	// when set, else TracingGRPC.
	Protocol TracingProtocol
	// Endpoint is the collector: host:port, or a URL (http:// or https://,
	// for HTTP with its path); empty means the exporters' own default
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT,
	// else localhost:4317 or localhost:4318).
	Endpoint string
	// Insecure sends to a host:port Endpoint without TLS (a URL's scheme
	// says so itself).
	Insecure bool
	// SamplingRatio is the fraction of new traces sampled, 0 to 1; a
	// caller's sampling decision (the traceparent's flag) is always
	// followed. DefaultSamplingRatio unless set.
	SamplingRatio float64
}

// TracingProtocol names an OTLP transport.
type TracingProtocol string

// The OTLP transports.
const (
	TracingGRPC TracingProtocol = "grpc"
	TracingHTTP TracingProtocol = "http"
)

// DefaultSamplingRatio samples every trace: a gateway's traces are few
// (one per call, never one per chunk), and a partial trace of an agent
// turn is of little use.
const DefaultSamplingRatio = 1.0

// tracing decodes the tracing block.
func (d *decoder) tracing(n *yaml.Node, t *Tracing) {
	f := field{"tracing", "tracing"}
	d.fields(n, f, "in tracing", map[string]func(*yaml.Node){
		"enabled": d.boolInto(&t.Enabled, f.child("enabled")),
		"protocol": func(v *yaml.Node) {
			if s, ok := d.scalar(v, f.child("protocol")); ok {
				t.Protocol = TracingProtocol(s)
			}
		},
		"endpoint":       d.stringInto(&t.Endpoint, f.child("endpoint"), true),
		"insecure":       d.boolInto(&t.Insecure, f.child("insecure")),
		"sampling_ratio": d.floatInto(&t.SamplingRatio, f.child("sampling_ratio")),
	})
}

// floatInto returns a handler storing a number setting (whole or not).
func (d *decoder) floatInto(dst *float64, f field) func(*yaml.Node) {
	return func(n *yaml.Node) {
		s, ok := d.scalar(n, f)
		if !ok {
			return
		}
		tag := resolve(n).ShortTag()
		v, err := strconv.ParseFloat(s, 64)
		if (tag != "!!float" && tag != "!!int") || err != nil {
			d.fail(n, f.path, "%s: expected a number, got %q", f.label, s)
			return
		}
		*dst = v
	}
}

// tracing checks the tracing block. Its settings are checked even when it
// is not enabled, so that turning it on cannot reveal an old mistake.
func (v *checker) tracing(t Tracing) {
	switch t.Protocol {
	case "", TracingGRPC, TracingHTTP:
	default:
		v.add("tracing.protocol", "tracing.protocol: %q must be %s or %s (OTLP over gRPC or over HTTP with protobuf)", t.Protocol, TracingGRPC, TracingHTTP)
	}
	if r := t.SamplingRatio; r < 0 || r > 1 || r != r {
		v.add("tracing.sampling_ratio", "tracing.sampling_ratio: must be between 0 and 1 (the fraction of new traces sampled), got %v", r)
	}
	if e := t.Endpoint; e != "" {
		if strings.Contains(e, "://") {
			u, err := url.Parse(e)
			switch {
			case err != nil:
				v.add("tracing.endpoint", "tracing.endpoint: %q is not a URL: %v", e, err)
			case u.Scheme != "http" && u.Scheme != "https":
				v.add("tracing.endpoint", "tracing.endpoint: %q must be http:// or https://, or a host:port", e)
			case u.Host == "":
				v.add("tracing.endpoint", "tracing.endpoint: %q names no host", e)
			}
		} else if !hasPort(e) {
			v.add("tracing.endpoint", "tracing.endpoint: %q is neither a host:port address nor an http:// or https:// URL", e)
		}
	}
}

// hasPort reports whether s is a host:port address.
func hasPort(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return false
	}
	_, err := strconv.ParseUint(s[i+1:], 10, 16)
	return err == nil
}
