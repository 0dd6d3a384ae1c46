package turn

import "runtime"

// collectAfter is the encoded size of a terminal from which the gateway
// collects garbage as soon as the turn has ended.
//
// A completed turn's terminal repeats its answer, twice for a one-message
// turn: for a long answer, hundreds of MiB built, encoded and journaled in
// a moment, then garbage. Go's collector paces itself on the heap it last
// found live, and the last collection ran while all that was live: it lets
// the heap grow to about twice that peak before it collects again. Until
// then the pages that slow streams read back from the journal took fresh
// memory rather than the turn's, and a slow client of a 156 MiB answer
// took the gateway from 530 MiB to over 1 GiB. A collection when the turn
// is over paces the next one from what is live again. It costs one
// collection per turn of this size, which has just written at least as
// much to its journal.
//
// It does not return the memory to the system at once
// (debug.FreeOSMemory): the runtime's scavenger does that within seconds
// when the gateway is quiet (RSS was back at 42 MiB 5 s into a slow
// client's read of a 156 MiB answer), and the next long turn, if it comes
// first, reuses the pages. Returned at once, every long turn faulted its
// memory in again: on the benchmark machine, a virtual machine where a
// page the guest has not touched lately costs a fault in the host, that
// was a quarter of the gateway's CPU on the 64 KiB flood.
const collectAfter = 32 << 20

// CollectAfterTurn collects garbage after a turn whose terminal had
// terminalBytes, when that is at least collectAfter. Call it once the
// turn's own goroutine holds nothing of it.
func CollectAfterTurn(terminalBytes int64) {
	if terminalBytes >= collectAfter {
		runtime.GC()
	}
}
