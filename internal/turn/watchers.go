package turn

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"github.com/acpgate/acpgate/internal/bytebudget"
	"github.com/acpgate/acpgate/internal/rpcerr"
)

// Bounds of what streams following turns hold (see Reader).
const (
	// ReadBudgetBytes bounds, gateway-wide, the bytes of the pages that
	// streams have read from the store and not yet sent. A stream blocked
	// on a client that does not read holds its page until the client
	// reads or leaves; without this bound a crowd of them, across
	// principals, held as many pages as there were streams.
	ReadBudgetBytes = 64 << 20
	// ReadBudgetWait bounds how long a stream waits for room in the
	// budget before it is refused (RESOURCE_EXHAUSTED, with a RetryInfo):
	// the budget is taken by streams that may never read again, so a
	// wait without a bound could be forever.
	ReadBudgetWait = 10 * time.Second
	// returnMemoryAfter and returnMemoryDelay: once at least
	// returnMemoryAfter watchers were open and half of them have left,
	// the memory they held is given back to the system returnMemoryDelay
	// later (see WatchLimits.leave).
	returnMemoryAfter = 16
	returnMemoryDelay = time.Second
)

// ReadBudget is a gateway-wide budget of bytes that readers take before
// they read a page from the store and give back once it is sent.
type ReadBudget struct{ *bytebudget.Budget }

// NewReadBudget is a budget of size bytes whose takers wait at most wait.
func NewReadBudget(size int, wait time.Duration) *ReadBudget {
	return &ReadBudget{bytebudget.New(int64(size), wait)}
}

// take waits until n bytes are free and takes them; n is at most the
// budget's size. It reports false when they were not free within the
// budget's wait, and ctx's cause when ctx ended first.
func (b *ReadBudget) take(ctx context.Context, n int) (bool, error) {
	return b.Take(ctx, int64(n))
}

// give gives back n bytes taken.
func (b *ReadBudget) give(n int) { b.Give(int64(n)) }

// inUse is the bytes taken.
func (b *ReadBudget) inUse() int { return int(b.InUse()) }

// WatchLimits counts the open WatchTurn streams, by turn
// (limits.max_watchers_per_turn) and by principal
// (limits.max_watchers_per_principal). Each stream costs what gRPC
// buffers for it and the page it is sending; without a count, a caller's
// connections × streams were the only bound on how many it could open
// and leave unread.
type WatchLimits struct {
	perTurn, perPrincipal int

	mu         sync.Mutex
	turns      map[string]int // open streams by turn id
	principals map[string]int // open streams by principal
	open, peak int            // open streams, and the most since memory was last given back
	returning  bool           // a return of memory is due
}

// NewWatchLimits bounds streams at perTurn a turn and perPrincipal a principal.
func NewWatchLimits(perTurn, perPrincipal int) *WatchLimits {
	return &WatchLimits{perTurn: perTurn, perPrincipal: perPrincipal, turns: map[string]int{}, principals: map[string]int{}}
}

// Enter counts one more stream of principal on turnID, or refuses it with
// RESOURCE_EXHAUSTED and a RetryInfo when a bound is reached. leave must
// be called once the stream ends.
func (w *WatchLimits) Enter(turnID, principal string) (leave func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.turns[turnID]; n >= w.perTurn {
		return nil, rpcerr.OverQuota(rpcerr.RetryDelay, "turn %q already has %d WatchTurn streams open (limits.max_watchers_per_turn); retry once one ends", turnID, n)
	}
	if n := w.principals[principal]; n >= w.perPrincipal {
		return nil, rpcerr.OverQuota(rpcerr.RetryDelay, "%s already has %d WatchTurn streams open (limits.max_watchers_per_principal); close one, or retry once one ends", rpcerr.Who(principal), n)
	}
	w.turns[turnID]++
	w.principals[principal]++
	w.open++
	w.peak = max(w.peak, w.open)
	var once sync.Once
	return func() { once.Do(func() { w.leave(turnID, principal) }) }, nil
}

// leave uncounts a stream. Once half the watchers of a crowd have left,
// the memory they held is given back to the system: the runtime would
// otherwise keep it, since the heap's goal, set while they held it, is
// not revised until the next collection, which an idle gateway may not
// run for minutes, and the pages it returns are only those above that
// goal.
func (w *WatchLimits) leave(turnID, principal string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	decrement(w.turns, turnID)
	decrement(w.principals, principal)
	w.open--
	if w.peak >= returnMemoryAfter && w.open <= w.peak/2 && !w.returning {
		w.returning = true
		time.AfterFunc(returnMemoryDelay, w.returnMemory)
	}
}

// returnMemory gives the memory the runtime holds and does not use back
// to the system.
func (w *WatchLimits) returnMemory() {
	debug.FreeOSMemory()
	w.mu.Lock()
	w.returning, w.peak = false, w.open
	w.mu.Unlock()
}

// decrement lowers m[key] by one, forgetting it at zero.
func decrement(m map[string]int, key string) {
	if m[key] <= 1 {
		delete(m, key)
		return
	}
	m[key]--
}
