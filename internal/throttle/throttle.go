// Package throttle spaces repeated warnings about one condition.
//
// A condition a client or an agent can repeat at will (a flood of
// connections, of calls without requests, of updates for sessions that do
// not exist) must not be able to flood the log: a line per occurrence let
// an agent write a line of the gateway's log per line of its own output,
// hundreds of thousands a second.
package throttle

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// Every is the least time between two warnings a Throttle lets through.
const Every = time.Minute

// Throttle lets a warning through at most once per Every and counts the
// ones it held back. The zero value is ready to use.
type Throttle struct {
	last atomic.Int64 // when the last warning was let through (UnixNano)
	held atomic.Int64 // warnings held back since then
}

// Allow reports whether a warning may be logged now and, if so, how many
// were held back since the last one let through.
func (t *Throttle) Allow() (ok bool, heldBack int64) {
	now := time.Now().UnixNano()
	last := t.last.Load()
	if now-last < int64(Every) || !t.last.CompareAndSwap(last, now) {
		t.held.Add(1)
		return false, 0
	}
	return true, t.held.Swap(0)
}

// Warn logs msg at warning level if Allow lets it through, saying that
// like warnings are spaced and how many were held back since the last.
func (t *Throttle) Warn(log *slog.Logger, msg string, args ...any) {
	if ok, held := t.Allow(); ok {
		log.Warn(msg+" (like warnings are logged at most once a minute)", append(args, "held_back", held)...)
	}
}
