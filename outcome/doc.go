// Package outcome decides what the ending of an ACP prompt turn means.
//
// ACP's answer to session/prompt carries a stop reason and nothing else, so
// two decisions have to be made somewhere, once, for every client language:
//
//  1. Which endings are a completed turn. Exactly one: stopReason end_turn.
//     refusal, max_tokens and max_turn_requests are the agent stopping short
//     of the work, and cancelled is a cancellation. Reporting any of them as
//     a completed result would hand a caller a refused or truncated answer as
//     though it were the real one.
//  2. Where the answer comes from. Not the response: it has no output field.
//     The agent's words arrived as agent_message_chunk updates and were
//     reassembled by the caller, so the accumulated text and the last
//     completed message travel here alongside the response.
//
// Every other ending becomes an acpgatev1.HarnessError whose kind names the
// class of failure (transport, protocol, harness, policy_refused, ...) and
// whose message is worded here and nowhere else.
//
// # An empty answer on a completed turn is honest
//
// A turn that ends end_turn having emitted only tool calls yields a
// PromptOutcome whose text is "". The agent finished and said nothing; its
// work is visible as tool events. Failing that turn, or substituting tool
// output for words the agent never spoke, would each report something that
// did not happen. A caller that needs text checks for it; this package will
// not invent it.
//
// # A broken channel is never an agent error
//
// When no answer arrived, the error is a TransportFailure naming which of the
// two unanswered endings happened (the agent closed its stdout, or reading it
// failed). It is never dressed up as a JSON-RPC error the agent did not send.
//
// The package is pure: no I/O, no goroutines, no clocks.
package outcome
