package server

import "runtime/debug"

// releaseAfter is the encoded size of a terminal from which the gateway
// returns the memory of a turn to the system as soon as the turn has
// ended.
//
// A completed turn's terminal repeats its answer, twice for a one-message
// turn: for a long answer, hundreds of MiB built, encoded and journaled in
// a moment, then garbage. Go's collector paces itself on the heap it last
// found live, and the last collection ran while all that was live: it lets
// the heap grow to about twice that peak before it collects again. Until
// then the pages that slow streams read back from the journal took fresh
// memory rather than the turn's, and a slow client of a 156 MiB answer
// took the gateway from 530 MiB to over 1 GiB. A collection when the turn
// is over paces the next one from what is live again, and hands the
// turn's memory back at once. It costs one collection per turn of this
// size, which has just written at least as much to its journal.
const releaseAfter = 32 << 20

// releaseAfterTurn returns memory to the system after a turn whose terminal
// had terminalBytes, when that is at least releaseAfter. Call it once the
// turn's own goroutine holds nothing of it.
func releaseAfterTurn(terminalBytes int64) {
	if terminalBytes >= releaseAfter {
		debug.FreeOSMemory()
	}
}
