// Package translate turns ACP's JSON shapes into the contract's protobuf
// messages, and a caller's prompt content into ACP's: session/update into
// PromptEvents, content blocks both ways, tool calls, a session's modes and
// configuration options, and the agent's _meta.
//
// It is the one place that knows both vocabularies, and it holds no state
// but the ids a connection's chunks repeat (IDCache): what an update means
// for a session or a turn is package acp's to decide. An update of a kind
// this version does not model becomes a raw event, so nothing the agent
// says is silently dropped.
//
// Message chunks are nearly all of an agent's traffic, so a text chunk is
// read by a scanner of its own (scan.go) before encoding/json is asked;
// fuzz targets hold the scanner and the fast path to encoding/json's
// answer.
package translate
