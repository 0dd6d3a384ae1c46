package access

import (
	"maps"
	"strings"
)

// ServiceName is the gRPC service's full name, as health checks and full
// method names give it.
const ServiceName = "acpgate.v1.AgentGateway"

// Every RPC of acpgate.v1.AgentGateway, declared once: who may make it
// and where it runs. rpcs is checked against the service descriptor by a
// test, so a new RPC without an entry fails the build's tests instead of
// shipping unauthorized or unrouted; the forwarding tables (forward.go)
// are derived from it, not written again.

// access is what a call's caller must be to get an answer.
type Requirement int

const (
	// AnyCaller: any authenticated caller; what it lists is what it
	// may see (ListAgents shows the agents it may use; listings of
	// sessions and turns are limited to its own, unless it is an admin).
	AnyCaller Requirement = iota + 1
	// AgentUser: the caller may use the agent the request names
	// (agents[].allow); PERMISSION_DENIED otherwise (agentFor).
	AgentUser
	// SessionOwner: the session the request names is the caller's
	// (or it is an admin); NOT_FOUND otherwise, worded as for an id that
	// does not exist (session, authz.sees).
	SessionOwner
	// TurnOwner: the same for the turn the request names (seen).
	TurnOwner
	// PromptCaller: a Prompt names a session (SessionOwner) or an
	// agent (AgentUser).
	PromptCaller
)

// route is where a call runs when the gateway is one of several replicas.
type Route int

const (
	// RouteHere: the replica the call reached answers it (from the store,
	// or from its own configuration).
	RouteHere Route = iota + 1
	// RouteSessionOwner: the replica that runs the session the request
	// names (relayed there when that is another replica).
	RouteSessionOwner
	// RoutePlaced: here, or, when this replica is at its session limit,
	// the replica with the most room.
	RoutePlaced
	// RoutePrompt: a Prompt on a session runs on the session's owner; a
	// one-shot Prompt is placed like CreateSession.
	RoutePrompt
)

// Rule is one RPC's declaration.
type Rule struct {
	Requires Requirement
	Route    Route
}

// rpcs is every RPC of AgentGateway by method name.
var rpcs = map[string]Rule{
	"ListAgents":             {AnyCaller, RouteHere},
	"CreateSession":          {AgentUser, RoutePlaced},
	"GetSession":             {SessionOwner, RouteSessionOwner},
	"ListSessions":           {AnyCaller, RouteHere},
	"CloseSession":           {SessionOwner, RouteSessionOwner},
	"Prompt":                 {PromptCaller, RoutePrompt},
	"Cancel":                 {SessionOwner, RouteSessionOwner},
	"ResolvePermission":      {SessionOwner, RouteSessionOwner},
	"ResolveElicitation":     {SessionOwner, RouteSessionOwner},
	"WatchTurn":              {TurnOwner, RouteHere},
	"GetTurn":                {TurnOwner, RouteHere},
	"ListTurns":              {AnyCaller, RouteHere},
	"SetSessionMode":         {SessionOwner, RouteSessionOwner},
	"SetSessionConfigOption": {SessionOwner, RouteSessionOwner},
	"ListAgentSessions":      {AgentUser, RouteHere},
	"DeleteAgentSession":     {AgentUser, RouteHere},
}

// Rules is every RPC's declaration by method name, a copy the caller may
// keep.
func Rules() map[string]Rule { return maps.Clone(rpcs) }

// MethodsRouted is the full method names ("/acpgate.v1.AgentGateway/Cancel")
// of the RPCs routed by r.
func MethodsRouted(r Route) map[string]bool {
	out := map[string]bool{}
	for name, rule := range rpcs {
		if rule.Route == r {
			out["/"+ServiceName+"/"+name] = true
		}
	}
	return out
}

// MethodName is the RPC name of a full method name.
func MethodName(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}
