// Package turn is the durable turn: how a running turn's events travel
// from the agent to the store and to every stream that reads them.
//
//	agent ──► Queue ──► Pump ──► Journal ──► store
//	                               │
//	                               └──► Reader / Cursor ──► each stream
//
// The Queue takes the agent's events without ever waiting on a client;
// Pump numbers, encodes (package wire) and journals them; the Journal
// keeps the recent ones in memory and commits them to the store behind
// the turn, reserving seqs so that a seq once read names the same event
// for good; every stream, the Prompt that started the turn and each
// WatchTurn alike, is a Cursor of its own that reads memory while it can
// and the store when it is behind. WatchLimits and ReadBudget bound what
// streams hold.
//
// What the gateway does around a turn (admission, sessions, spans,
// notifications) is the server's; this package knows only events, seqs
// and the store.
package turn
