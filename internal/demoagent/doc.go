// Package demoagent is acpgate's built-in demo agent: a small, deterministic
// Agent Client Protocol (ACP) agent that lets a newcomer try the gateway with
// nothing else installed. The acpgate binary serves it on stdin/stdout as
// `acpgate demo-agent`; [Run] serves one connection on any reader and writer.
//
// The agent has no model behind it. It answers each prompt by looking for a
// keyword and playing back a scripted turn, so every way an ACP turn can end
// (and most kinds of session update) can be produced on demand.
//
// # Protocol surface
//
//   - initialize answers protocol version 1, agentInfo
//     {name: "acpgate-demo", version: "1"}, loadSession false and no
//     authentication methods. The client's capabilities are remembered.
//   - session/new mints an id of the form "demo-<32 hex digits>" and
//     remembers the session's cwd, which must be an absolute path.
//   - session/prompt plays the turn chosen by the prompt's keyword (below).
//   - session/cancel makes the session's running turn answer stopReason
//     "cancelled" promptly, whatever the keyword.
//   - Every other method (authenticate, session/load, session/list,
//     session/resume, session/close, session/set_mode,
//     session/set_config_option and the unstable ones) is answered with a
//     JSON-RPC error.
//
// # Keywords
//
// The request is the prompt's text blocks joined with newlines. Each keyword
// is matched case-insensitively as a whole word anywhere in the request
// ("REFUSE" matches refuse, "refused" does not). When several keywords occur,
// the first in this list wins, whatever their order in the text:
//
//   - refuse: streams "I can't help with that." and answers stopReason
//     "refusal".
//   - truncate: streams a few chunks of an answer that stops mid-sentence and
//     answers "max_tokens".
//   - loop: sends a plan and two tool_call / tool_call_update pairs (no
//     message text) and answers "max_turn_requests".
//   - slow: streams one chunk per second for 60 seconds, then answers
//     "end_turn"; it exists so a client can try session/cancel, which makes
//     it answer "cancelled" at once.
//   - fail: answers with the JSON-RPC error -32603 "the demo agent was asked
//     to fail" and streams nothing.
//   - tools: a turn of tool calls only: one tool_call and its
//     tool_call_update (completed), no message text, "end_turn".
//   - read <relative-path>: the word read followed by a path. The agent
//     reports a read tool call, asks the client for the file with
//     fs/read_text_file (the path joined to the session's cwd; an absolute
//     path is used as given) and streams "<path> has N lines; first line: ...".
//     If the client did not advertise fs.readTextFile, or refuses or fails
//     the read, the answer says so. The turn ends with "end_turn" either way.
//     The word read with no path after it is not a keyword.
//   - think: streams two agent_thought_chunk updates, then plays the default
//     turn.
//   - anything else (the default): a plan of three entries, updated as each
//     completes, and two agent messages, each streamed a few words per chunk
//     under its own messageId: the first echoes the request (cut to 200
//     characters), the second lists these keywords. Answers "end_turn".
//
// Updates are paced by [Options.ChunkDelay] (30ms by default) so streaming is
// visible; slow ticks once per second regardless. All text is fixed or
// derived from the request; only ids (session ids, messageIds, which are
// random UUIDs as ACP requires) vary between runs. Tool call ids count up per
// session ("call-1", "call-2", ...).
package demoagent
