package clientreq

import "go.opentelemetry.io/otel/attribute"

// Attribute keys of the decisions on the agent's requests, set on the span
// of the request (which package acp starts) by the code that decides. The
// rest of the acpgate domain's keys are package acp's.
const (
	AttrPermission  = attribute.Key("acpgate.permission.decided_by")
	AttrPermOption  = attribute.Key("acpgate.permission.option_id")
	AttrPermCancel  = attribute.Key("acpgate.permission.cancelled")
	AttrElicitation = attribute.Key("acpgate.elicitation.action")
)
