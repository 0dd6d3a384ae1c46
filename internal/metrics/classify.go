package metrics

import (
	"strings"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/outcome"
)

// Classify gives a turn's terminal its class and reason labels: outcome
// for a completed turn (e nil); otherwise the HarnessError's class
// (outcome.Class) and, for transport, the transport reason, and for
// harness, cancelled, auth_required, the stop kind, or rpc_error. Every
// value comes from a fixed set.
func Classify(e *acpgatev1.HarnessError) (class, reason string) {
	if e == nil {
		return ClassOutcome, ReasonNone
	}
	class = outcome.Class(e)
	switch {
	case e.GetTransport() != nil:
		reason = enumLabel(e.GetTransport().GetReason().String(), "TRANSPORT_REASON_")
	case e.GetHarness() != nil:
		h := e.GetHarness()
		switch {
		case h.GetCancelled():
			reason = "cancelled"
		case h.GetAuthRequired():
			reason = "auth_required"
		case h.GetStopKind() != acpgatev1.StopKind_STOP_KIND_UNSPECIFIED:
			reason = enumLabel(h.GetStopKind().String(), "STOP_KIND_")
		case h.RpcCode != nil:
			reason = "rpc_error"
		default:
			reason = "unspecified"
		}
	}
	return class, reason
}

// enumLabel turns an enum value's name into a label value:
// TRANSPORT_REASON_STREAM_ENDED is stream_ended.
func enumLabel(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}
