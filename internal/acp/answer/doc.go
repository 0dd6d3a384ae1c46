// Package answer holds a turn's answer text for its outcome: the agent's
// message chunks reassembled into messages (Accumulator), within a bound on
// what every turn of the gateway holds together (Budget).
//
// It is a package of its own because it is the gateway's one place where an
// agent decides how much memory is held on its behalf: a long answer is
// kept as its long chunks and runs of its short ones, and joined at most
// once, and when the budget has
// no room, or nobody will read the whole text, only the beginning that a
// failure's partial output needs is kept. The turn (package acp) decides
// when; this package decides what is kept, and proves with its tests that a
// bound imposed midway ends exactly as one imposed from the start.
package answer
