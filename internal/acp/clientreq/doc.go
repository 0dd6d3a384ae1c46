// Package clientreq answers the requests an agent makes of its client (the
// gateway) during a session: session/request_permission and
// elicitation/create, each answered by a policy or by asking the gateway's
// clients, and fs/read_text_file and fs/write_text_file, served from the
// session's working directory and confined to it.
//
// It is a package of its own because these are the agent's initiative, not
// the gateway's: each request is bounded (a timeout on asking, a size on
// reading, a directory it may not leave) so that an agent cannot make the
// gateway wait, hold or touch more than its configuration allows. Package
// acp routes each request to its session and calls in here with the turn
// it arrived during (Turn); the requests that wait for a client share one
// piece of machinery (pending.go), so that each kind ends the same ways.
package clientreq

import acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"

// Turn is the running prompt turn a request of the agent's arrives during,
// as answering the request needs it.
type Turn interface {
	// CancelRequested reports whether the turn's cancellation has been
	// requested.
	CancelRequested() bool
	// CancelSent is closed once session/cancel has been written to the
	// agent (or failed to be).
	CancelSent() <-chan struct{}
	// Ended is closed when the turn has its result.
	Ended() <-chan struct{}
	// EmitRequest emits an event about a request of the agent's; splits
	// ends an id-less message first, since the agent has turned away from
	// it.
	EmitRequest(e *acpgatev1.PromptEvent, splits bool)
}
