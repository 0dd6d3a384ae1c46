package access

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Every RPC the service descriptor has is declared in rpcs, and nothing
// else is: a new RPC cannot ship without a decision on who may call it and
// where it runs.
func TestEveryRPCOfTheServiceIsDeclaredOnce(t *testing.T) {
	methods := acpgatev1.File_acpgate_v1_gateway_proto.Services().ByName("AgentGateway").Methods()
	seen := map[string]bool{}
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		seen[name] = true
		if _, ok := rpcs[name]; !ok {
			t.Errorf("%s has no entry in rpcs (rpcs.go): declare who may call it and where it runs", name)
		}
	}
	for name := range rpcs {
		if !seen[name] {
			t.Errorf("rpcs declares %s, which the service does not have", name)
		}
	}
}

// A declaration must be one the request can honour: an RPC checked against
// a session's owner, or routed to it, names a session; one checked against
// a turn's owner names a turn; one checked against an agent's allow list
// names an agent.
func TestEachDeclarationMatchesItsRequest(t *testing.T) {
	methods := acpgatev1.File_acpgate_v1_gateway_proto.Services().ByName("AgentGateway").Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		rule, ok := rpcs[string(m.Name())]
		if !ok {
			continue
		}
		has := func(field protoreflect.Name) bool { return m.Input().Fields().ByName(field) != nil }
		need := map[Requirement][]protoreflect.Name{
			AgentUser:    {"agent"},
			SessionOwner: {"session_id"},
			TurnOwner:    {"turn_id"},
			PromptCaller: {"agent", "session_id"},
		}[rule.Requires]
		if rule.Route == RouteSessionOwner {
			need = append(need, "session_id")
		}
		for _, f := range need {
			if !has(f) {
				t.Errorf("%s is declared %v/%v, but %s has no field %s", m.Name(), rule.Requires, rule.Route, m.Input().FullName(), f)
			}
		}
		if rule.Requires == 0 || rule.Route == 0 {
			t.Errorf("%s is declared without an access or a route", m.Name())
		}
	}
}
