package server

import "strings"

// Every RPC of acpgate.v1.AgentGateway, declared once: who may make it
// and where it runs. rpcs is checked against the service descriptor by a
// test, so a new RPC without an entry fails the build's tests instead of
// shipping unauthorized or unrouted; the forwarding tables (forward.go)
// are derived from it, not written again.

// access is what a call's caller must be to get an answer.
type access int

const (
	// accessAnyCaller: any authenticated caller; what it lists is what it
	// may see (ListAgents shows the agents it may use; listings of
	// sessions and turns are limited to its own, unless it is an admin).
	accessAnyCaller access = iota + 1
	// accessAgentUser: the caller may use the agent the request names
	// (agents[].allow); PERMISSION_DENIED otherwise (agentFor).
	accessAgentUser
	// accessSessionOwner: the session the request names is the caller's
	// (or it is an admin); NOT_FOUND otherwise, worded as for an id that
	// does not exist (session, authz.sees).
	accessSessionOwner
	// accessTurnOwner: the same for the turn the request names (seen).
	accessTurnOwner
	// accessPrompt: a Prompt names a session (accessSessionOwner) or an
	// agent (accessAgentUser).
	accessPrompt
)

// route is where a call runs when the gateway is one of several replicas.
type route int

const (
	// routeHere: the replica the call reached answers it (from the store,
	// or from its own configuration).
	routeHere route = iota + 1
	// routeSessionOwner: the replica that runs the session the request
	// names (relayed there when that is another replica).
	routeSessionOwner
	// routePlaced: here, or, when this replica is at its session limit,
	// the replica with the most room.
	routePlaced
	// routePrompt: a Prompt on a session runs on the session's owner; a
	// one-shot Prompt is placed like CreateSession.
	routePrompt
)

// rpcRule is one RPC's declaration.
type rpcRule struct {
	access access
	route  route
}

// rpcs is every RPC of AgentGateway by method name.
var rpcs = map[string]rpcRule{
	"ListAgents":             {accessAnyCaller, routeHere},
	"CreateSession":          {accessAgentUser, routePlaced},
	"GetSession":             {accessSessionOwner, routeSessionOwner},
	"ListSessions":           {accessAnyCaller, routeHere},
	"CloseSession":           {accessSessionOwner, routeSessionOwner},
	"Prompt":                 {accessPrompt, routePrompt},
	"Cancel":                 {accessSessionOwner, routeSessionOwner},
	"ResolvePermission":      {accessSessionOwner, routeSessionOwner},
	"ResolveElicitation":     {accessSessionOwner, routeSessionOwner},
	"WatchTurn":              {accessTurnOwner, routeHere},
	"GetTurn":                {accessTurnOwner, routeHere},
	"ListTurns":              {accessAnyCaller, routeHere},
	"SetSessionMode":         {accessSessionOwner, routeSessionOwner},
	"SetSessionConfigOption": {accessSessionOwner, routeSessionOwner},
	"ListAgentSessions":      {accessAgentUser, routeHere},
	"DeleteAgentSession":     {accessAgentUser, routeHere},
}

// methodsRouted is the full method names ("/acpgate.v1.AgentGateway/Cancel")
// of the RPCs routed by r.
func methodsRouted(r route) map[string]bool {
	out := map[string]bool{}
	for name, rule := range rpcs {
		if rule.route == r {
			out["/"+ServiceName+"/"+name] = true
		}
	}
	return out
}

// methodName is the RPC name of a full method name.
func methodName(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}
