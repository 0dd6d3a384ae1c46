package outcome

import (
	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Class names a HarnessError's class: the name of the `kind` arm that is
// set ("transport", "protocol", "harness", "policy_refused", …), or
// "unknown" when none is.
//
// It is read from the message's descriptor, not from a switch over the Go
// types, so a class added to the contract is named correctly everywhere
// (logs, the CLI, conformance) without another list to keep in step.
func Class(e *acpgatev1.HarnessError) string {
	m := e.ProtoReflect()
	kind := m.Descriptor().Oneofs().ByName("kind")
	if f := m.WhichOneof(kind); f != nil {
		return string(f.Name())
	}
	return "unknown"
}
