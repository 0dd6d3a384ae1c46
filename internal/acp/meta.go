package acp

import (
	"fmt"
	"maps"
	"strings"
)

// ACP's _meta on the way to the agent: what a caller may add to the
// session/prompt request. (The agent's _meta comes back as a Struct: see
// translate.ObjectStruct.)
//
// ACP reserves the root keys traceparent, tracestate and baggage of _meta
// for W3C trace context, which the gateway itself writes (Config.Propagator),
// and every other root name for future protocol versions; extensions use
// namespaced keys such as "zed.dev/debugMode". So a caller's key must be
// namespaced ("<namespace>/<name>"), the namespace "acpgate" is the
// gateway's own, and a caller can never set or override the trace keys.

// Bounds of a caller's _meta: it rides on every prompt and in the turn's
// record, and a key is an identifier, not a payload.
const (
	MaxCallerMetaEntries    = 32
	MaxCallerMetaKeyBytes   = 128
	MaxCallerMetaValueBytes = 4096
)

// reservedMetaKeys are the trace context keys ACP reserves in _meta.
var reservedMetaKeys = []string{"traceparent", "tracestate", "baggage"}

// CheckCallerMeta validates a caller's _meta entries; the error names the
// first offending key and the rule it breaks.
func CheckCallerMeta(meta map[string]string) error {
	if len(meta) > MaxCallerMetaEntries {
		return fmt.Errorf("meta has %d entries, over the limit of %d", len(meta), MaxCallerMetaEntries)
	}
	for k, v := range meta {
		for _, r := range reservedMetaKeys {
			if strings.EqualFold(k, r) {
				return fmt.Errorf("meta key %q is reserved by ACP for trace context, which the gateway sets itself", k)
			}
		}
		ns, name, ok := strings.Cut(k, "/")
		switch {
		case len(k) > MaxCallerMetaKeyBytes:
			return fmt.Errorf("meta key %q is longer than %d bytes", k, MaxCallerMetaKeyBytes)
		case !printableASCII(k):
			return fmt.Errorf("meta key %q is not printable ASCII without spaces", k)
		case !ok || ns == "" || name == "":
			return fmt.Errorf("meta key %q is not namespaced: ACP reserves root names for the protocol, so use \"<namespace>/<name>\" (for example \"example.com/ticket\")", k)
		case strings.EqualFold(ns, "acpgate"):
			return fmt.Errorf("meta key %q: the namespace acpgate is the gateway's own", k)
		case len(v) > MaxCallerMetaValueBytes:
			return fmt.Errorf("meta key %q: the value is longer than %d bytes", k, MaxCallerMetaValueBytes)
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// withCallerMeta merges a caller's entries into the _meta the gateway built
// (its trace context): the gateway's keys win, whatever CheckCallerMeta
// let through. It returns nil when both are empty, which leaves _meta out.
func withCallerMeta(gateway map[string]any, caller map[string]string) map[string]any {
	if len(caller) == 0 {
		return gateway
	}
	out := make(map[string]any, len(gateway)+len(caller))
	for k, v := range caller {
		out[k] = v
	}
	maps.Copy(out, gateway)
	return out
}
