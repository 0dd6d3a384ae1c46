package outcome

import (
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

func TestClassIsTheNameOfTheArmThatIsSet(t *testing.T) {
	cases := map[string]*acpgatev1.HarnessError{
		"transport":                {Kind: &acpgatev1.HarnessError_Transport{Transport: &acpgatev1.TransportFailure{}}},
		"protocol":                 {Kind: &acpgatev1.HarnessError_Protocol{Protocol: &acpgatev1.ProtocolViolation{}}},
		"harness":                  {Kind: &acpgatev1.HarnessError_Harness{Harness: &acpgatev1.HarnessFailure{}}},
		"policy_refused":           {Kind: &acpgatev1.HarnessError_PolicyRefused{PolicyRefused: &acpgatev1.PolicyRefusal{}}},
		"capability_not_supported": {Kind: &acpgatev1.HarnessError_CapabilityNotSupported{CapabilityNotSupported: &acpgatev1.CapabilityNotSupported{}}},
		"stale_target":             {Kind: &acpgatev1.HarnessError_StaleTarget{StaleTarget: &acpgatev1.StaleTarget{}}},
		"unknown":                  {},
	}
	for want, e := range cases {
		if got := Class(e); got != want {
			t.Errorf("Class(%v) = %q, want %q", e, got, want)
		}
	}
}
