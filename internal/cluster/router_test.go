package cluster

import (
	"testing"

	"github.com/acpgate/acpgate/internal/access"
)

// The forwarding tables are the declaration's: the calls a replica relays
// to a session's owner, and the ones it places on the replica with room.
func TestForwardingFollowsTheDeclaration(t *testing.T) {
	for name, rule := range access.Rules() {
		full := "/" + access.ServiceName + "/" + name
		if sessionMethods[full] != (rule.Route == access.RouteSessionOwner) {
			t.Errorf("%s: relayed to the session's owner %v, declared %v", name, sessionMethods[full], rule.Route)
		}
		if placedMethods[full] != (rule.Route == access.RoutePlaced) {
			t.Errorf("%s: placed %v, declared %v", name, placedMethods[full], rule.Route)
		}
	}
	if len(sessionMethods) == 0 || len(placedMethods) == 0 {
		t.Error("no method is relayed or placed: the derivation is broken")
	}
}
