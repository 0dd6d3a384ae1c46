// Package acp is the gateway's client side of the Agent Client Protocol: it
// runs an agent program, talks JSON-RPC 2.0 with it over newline-delimited
// stdio, and turns what the agent says into contract events and one honest
// ending per turn.
//
// # The model
//
// Process → connection → session → turn → outcome.
//
// A Session runs on one agent process (a Conn), started with exec (never a
// shell) as PID 1 of a PID namespace of its own where the kernel allows
// it, in a process group of its own regardless, with an environment built
// from configuration and the session's working directory (see package
// agentproc for the containment and why). Its stderr is kept in a bounded
// ring buffer.
// The process is the session's alone, unless further sessions Join it; the
// agent's messages reach the session their sessionId names. Closing the
// process's last session closes the agent's stdin, waits a grace period,
// sends SIGTERM to the group, waits again, sends SIGKILL, and reaps: no
// zombies, and no grandchildren left behind.
//
// The connection (package acp/jsonrpc) reads the agent's stdout on one
// goroutine. Notifications are applied in arrival order; requests the agent
// makes (permission, fs) are served concurrently, at most
// Config.MaxAgentRequests at once (the reader waits for a slot beyond
// that), their answers holding at most Config.MaxAgentReplyBytes until the
// agent reads them; writes are serialized.
//
// Open performs the handshake: initialize (protocol version 1), authenticate
// when an auth method is configured, then session/new or session/load.
//
// Session.Prompt runs one turn (ACP allows one at a time per session). Each
// session/update becomes a *acpgatev1.PromptEvent passed to the caller's
// emit function; agent_message_chunk text is reassembled into messages for
// the outcome. The agent's answer to session/prompt — or the way the channel
// broke before one arrived — goes to package outcome, which decides what it
// means. Cancelling sends session/cancel, answers pending permission
// requests cancelled, and waits for the agent's answer; an agent that does
// not answer within the grace period is stopped.
//
// # The sub-packages
//
// This package is the session: it routes the agent's messages, drives the
// handshake and the turns, and owns their state. What it delegates does not
// depend on it:
//
//   - agentproc starts the agent's process and contains its tree;
//   - jsonrpc is the connection on the agent's stdio;
//   - translate turns ACP's shapes into the contract's, and a prompt's
//     content into ACP's;
//   - answer holds a turn's answer text within the gateway's budget;
//   - clientreq answers the agent's requests of its client (permission,
//     elicitation, fs), seeing the turn through its Turn interface.
//
// # Why the transport is our own
//
// ACP's schema types come from github.com/coder/acp-go-sdk. Its Connection
// does not serve the gateway's client side: in v0.13.0 a peer that
// disconnects before answering is reported as a JSON-RPC -32603 error —
// indistinguishable from the agent's own -32603 error response — and an
// undecodable response line is logged and skipped. Either would make the
// gateway assert a cause that did not happen. The gateway's small JSON-RPC
// layer keeps the three endings of a request distinct: answered (the
// id-matched response, exactly as sent), stream ended (EOF on the agent's
// stdout), and transport failed (a read error, including a line over the
// frame limit).
//
// # Running a turn
//
//	s, err := acp.Open(ctx, acp.Config{Agent: "gemini", Process: agentproc.Spec{
//		Command: "gemini", Args: []string{"--acp"}, Env: env,
//	}}, acp.OpenOptions{Cwd: dir})
//	if err != nil { ... } // *acp.Error carries the classification
//	defer s.Close()
//	result, err := s.Prompt(ctx, []acpsdk.ContentBlock{acpsdk.TextBlock("hello")},
//		acp.PromptOptions{Emit: func(e *acpgatev1.PromptEvent) { ... }})
//	// exactly one of result.Outcome and result.Error is set
package acp
