package main

import (
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// A class added to the contract needs an exit code decided for it, not the
// fallback by accident.
func TestEveryHarnessErrorClassHasAnExitCode(t *testing.T) {
	arms := (&acpgatev1.HarnessError{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
	for i := range arms.Len() {
		if name := string(arms.Get(i).Name()); classExits[name] == 0 {
			t.Errorf("class %q has no entry in classExits", name)
		}
	}
	if len(classExits) != arms.Len() {
		t.Errorf("classExits has %d entries, HarnessError has %d classes", len(classExits), arms.Len())
	}
}
